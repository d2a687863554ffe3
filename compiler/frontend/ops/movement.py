"""Data movement: views (Reshape, Flatten, Squeeze, Unsqueeze), copies with index maps
(Transpose, Concat, Split, Slice, Gather, Expand, Pad, Tile, ...), Identity and Dropout."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from compiler.frontend.broadcast import broadcast_index, broadcast_shape
from compiler.frontend.exprs import clamp, compute, idx, load, out_index, scalar
from compiler.frontend.ops.constants import fill
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import INDEX
from compiler.ir.te import Expr, call, cast, select

IndexMap = Callable[[list[Expr]], Sequence[Expr]]


def gather_copy(cx: OpContext, x: Value, shape: Sequence[int], index: IndexMap) -> Value:
    """out[i] = x[index(i)] over `shape`."""
    return cx.emit(compute(shape, load(0, x, index(out_index(len(shape)))), [x]), [x])


# -- identity-like --------------------------------------------------------------


@lowering("Identity", takes_sequences=True)
def identity(cx: OpContext) -> Outputs:
    return [cx.value(0)]  # a tensor or (opset 14 on) a sequence


@lowering("Dropout")
def dropout(cx: OpContext) -> Outputs:
    x = cx.input(0)
    training = cx.optional(2)
    if training is not None:
        mode = cx.const_input(2, "training_mode")
        ratio = cx.const_input(1, "ratio")
        if bool(np.asarray(mode).reshape(-1)[0]) and (ratio is None or float(ratio) != 0.0):
            raise cx.unsupported("training-mode dropout is random; only inference is supported")
    mask = fill(cx, x.shape, True, "bool") if cx.num_outputs > 1 else None
    return [x, mask]


# -- views ----------------------------------------------------------------------


@lowering("Reshape")
def reshape(cx: OpContext) -> Outputs:
    x = cx.input(0)
    target = [int(d) for d in cx.const_input(1, "shape").reshape(-1)]
    allow_zero = cx.attr("allowzero", 0)
    dims = [x.shape[k] if d == 0 and not allow_zero else d for k, d in enumerate(target)]
    if dims.count(-1) > 1:
        raise cx.error(f"shape {target} has more than one -1")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or math.prod(x.shape) % known:
            raise cx.error(f"cannot reshape {list(x.shape)} to {target}")
        dims[dims.index(-1)] = math.prod(x.shape) // known
    return [cx.view(x, dims)]


@lowering("Flatten")
def flatten(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axis = cx.attr("axis", 1)
    axis = axis + x.rank if axis < 0 else axis
    if not 0 <= axis <= x.rank:
        raise cx.error(f"axis {cx.attr('axis')} out of range for rank {x.rank}")
    return [cx.view(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))]


@lowering("Squeeze")
def squeeze(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axes = cx.ints_from("axes", 1, "axes")
    if axes is None:
        drop = {d for d, n in enumerate(x.shape) if n == 1}
    else:
        drop = {cx.axis(a, x.rank) for a in axes}
        if any(x.shape[d] != 1 for d in drop):
            raise cx.error(f"cannot squeeze axes {axes} of shape {list(x.shape)}")
    return [cx.view(x, [n for d, n in enumerate(x.shape) if d not in drop])]


@lowering("Unsqueeze")
def unsqueeze(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axes = cx.ints_from("axes", 1, "axes") or []
    rank = x.rank + len(axes)
    new = {cx.axis(a, rank) for a in axes}
    if len(new) != len(axes):
        raise cx.error(f"repeated axes {axes}")
    rest = iter(x.shape)
    return [cx.view(x, [1 if d in new else next(rest) for d in range(rank)])]


# -- copies ---------------------------------------------------------------------


@lowering("Transpose")
def transpose(cx: OpContext) -> Outputs:
    x = cx.input(0)
    perm = [int(p) for p in cx.attr("perm", list(range(x.rank))[::-1])]
    if sorted(perm) != list(range(x.rank)):
        raise cx.error(f"perm {perm} is not a permutation of {x.rank} axes")

    shape = [x.shape[p] for p in perm]
    moved = [p for p in perm if x.shape[p] != 1]
    if moved == sorted(moved):
        # Only unit axes move (a sequence-first [S, 1, D] made batch-first): the same
        # elements in the same order, so a view. As a copy it was a kernel of its own, or
        # a member that hid a fused group's rows ([S, 1, D] read as [1, S, D] shares one).
        return [cx.view(x, shape)]

    def index(i: list[Expr]) -> list[Expr]:
        src: list[Expr] = [idx(0)] * x.rank
        for k, p in enumerate(perm):
            src[p] = i[k]
        return src

    return [gather_copy(cx, x, shape, index)]


# The most parts one concatenation kernel reads. Its body is a select chain that loads
# every part at every element (and the tiler counts a register per part, so a long chain
# gets one-element tiles): an LSTM's 64 step outputs cost 64 loads per element, 21% of
# the model. Longer lists are concatenated in groups, a tree of kernels each reading
# at most this many parts.
CONCAT_FAN_IN = 8


def concat_values(cx: OpContext, parts: Sequence[Value], axis: int) -> Value:
    """The concatenation of `parts` along `axis`: one kernel (a select chain over offsets)
    per group of at most CONCAT_FAN_IN parts, a tree of them for more."""
    parts = [p for p in parts if p.shape[axis] > 0] or list(parts[:1])
    while len(parts) > CONCAT_FAN_IN:
        parts = [_concat_kernel(cx, parts[k:k + CONCAT_FAN_IN], axis) for k in range(0, len(parts), CONCAT_FAN_IN)]
    return _concat_kernel(cx, parts, axis)


def _concat_kernel(cx: OpContext, parts: Sequence[Value], axis: int) -> Value:
    """One kernel concatenating `parts` (none empty along `axis`, or just one)."""
    if len(parts) == 1:
        return parts[0]
    base = parts[0].shape
    for p in parts:
        if p.rank != len(base) or any(a != b for d, (a, b) in enumerate(zip(p.shape, base, strict=True))
                                      if d != axis):
            raise cx.error(f"cannot concatenate shapes {[list(q.shape) for q in parts]} on axis {axis}")
    total = sum(p.shape[axis] for p in parts)
    shape = (*base[:axis], total, *base[axis + 1:])
    i = out_index(len(shape))
    body: Expr | None = None
    offset = total
    for k in range(len(parts) - 1, -1, -1):
        n = parts[k].shape[axis]
        offset -= n
        at = [*i[:axis], clamp(i[axis] - idx(offset), 0, n - 1), *i[axis + 1:]]
        value = load(k, parts[k], at)
        body = value if body is None else select(call("lt", i[axis], idx(offset + n)), value, body)
    assert body is not None
    return cx.emit(compute(shape, body, parts), parts)


@lowering("Concat")
def concat(cx: OpContext) -> Outputs:
    parts = [v for v in cx.inputs if v is not None]
    return [concat_values(cx, parts, cx.axis(cx.attr("axis"), parts[0].rank))]


def slice_along(cx: OpContext, x: Value, axis: int, start: int, length: int) -> Value:
    """x[..., start:start+length, ...] on `axis`."""
    shape = (*x.shape[:axis], length, *x.shape[axis + 1:])
    return gather_copy(cx, x, shape, lambda i: [*i[:axis], i[axis] + idx(start), *i[axis + 1:]])


@lowering("Split")
def split(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axis = cx.axis(cx.attr("axis", 0), x.rank)
    n = x.shape[axis]
    sizes = cx.ints_from("split", 1, "split")
    if sizes is None:
        parts = cx.attr("num_outputs", cx.num_outputs)
        chunk = -(-n // parts)
        sizes = [min(chunk, n - k * chunk) for k in range(parts)]
    return list(split_values(cx, x, axis, sizes))


def split_values(cx: OpContext, x: Value, axis: int, sizes: Sequence[int]) -> list[Value]:
    """x cut along `axis` into consecutive pieces of `sizes`."""
    n = x.shape[axis]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise cx.error(f"split sizes {list(sizes)} do not add up to {n}")
    starts = np.cumsum([0, *sizes[:-1]])
    return [slice_along(cx, x, axis, int(s), int(z)) for s, z in zip(starts, sizes, strict=True)]


def stack_values(cx: OpContext, parts: Sequence[Value], axis: int) -> Value:
    """`parts` (of one shape) stacked along a new `axis`."""
    return concat_values(cx, [cx.view(v, (*v.shape[:axis], 1, *v.shape[axis:])) for v in parts], axis)


@lowering("Slice")
def slice_(cx: OpContext) -> Outputs:
    x = cx.input(0)
    starts = cx.ints_from("starts", 1, "starts")
    ends = cx.ints_from("ends", 2, "ends")
    if starts is None or ends is None or len(starts) != len(ends):
        raise cx.error("starts and ends must be given with equal lengths")
    axes = cx.ints_from("axes", 3, "axes") or list(range(len(starts)))
    steps = cx.ints_from("steps", 4, "steps") or [1] * len(starts)
    first = [0] * x.rank
    step = [1] * x.rank
    shape = list(x.shape)
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        d = cx.axis(a, x.rank)
        if st == 0:
            raise cx.error("slice step is zero")
        lo, hi, st = slice(s, e, st).indices(x.shape[d])  # ONNX clamping = Python's
        first[d], step[d], shape[d] = lo, st, len(range(lo, hi, st))
    return [gather_copy(cx, x, shape, lambda i: [i[d] * idx(step[d]) + idx(first[d]) for d in range(x.rank)])]


def element_index(e: Expr, n: int) -> Expr:
    """A data-dependent index read from a tensor: negatives wrap once, then clamped in bounds."""
    v = cast(e, INDEX)
    return clamp(select(call("lt", v, idx(0)), v + idx(n), v), 0, max(n - 1, 0))


def _check_constant_indices(cx: OpContext, ind: Value, extent: int, axis: int) -> None:
    """Constant indices must lie in [-extent, extent): ONNX leaves others undefined, and
    onnxruntime refuses them at run time (data-dependent ones are clamped, see above)."""
    if ind.array is None or ind.array.size == 0:
        return
    low, high = int(ind.array.min()), int(ind.array.max())
    if low < -extent or high >= extent:
        bad = high if high >= extent else low
        raise cx.error(f"index {bad} is out of range for axis {axis} of extent {extent}")


@lowering("Gather")
def gather(cx: OpContext) -> Outputs:
    x, ind = cx.input(0), cx.input(1)
    axis = cx.axis(cx.attr("axis", 0), x.rank)
    _check_constant_indices(cx, ind, x.shape[axis], axis)
    shape = (*x.shape[:axis], *ind.shape, *x.shape[axis + 1:])
    i = out_index(len(shape))
    k = ind.rank
    at = [*i[:axis], element_index(load(1, ind, i[axis:axis + k]), x.shape[axis]), *i[axis + k:]]
    return [cx.emit(compute(shape, load(0, x, at), [x, ind]), [x, ind])]


@lowering("GatherElements")
def gather_elements(cx: OpContext) -> Outputs:
    x, ind = cx.input(0), cx.input(1)
    axis = cx.axis(cx.attr("axis", 0), x.rank)
    _check_constant_indices(cx, ind, x.shape[axis], axis)
    i = out_index(ind.rank)
    at = [*i[:axis], element_index(load(1, ind, i), x.shape[axis]), *i[axis + 1:]]
    return [cx.emit(compute(ind.shape, load(0, x, at), [x, ind]), [x, ind])]


@lowering("Expand")
def expand(cx: OpContext) -> Outputs:
    x = cx.input(0)
    target = [int(d) for d in cx.const_input(1, "shape").reshape(-1)]
    shape = broadcast_shape([x.shape, target], f"{cx.op} shape")
    return [gather_copy(cx, x, shape, lambda i: broadcast_index(x.shape, i))]


@lowering("Tile")
def tile(cx: OpContext) -> Outputs:
    x = cx.input(0)
    reps = [int(r) for r in cx.const_input(1, "repeats").reshape(-1)]
    if len(reps) != x.rank or any(r < 0 for r in reps):
        raise cx.error(f"repeats {reps} do not fit rank {x.rank}")
    shape = [n * r for n, r in zip(x.shape, reps, strict=True)]
    return [gather_copy(cx, x, shape, lambda i: [
        i[d] if reps[d] == 1 else call("floormod", i[d], idx(x.shape[d])) for d in range(x.rank)])]


def _pad_index(mode: str, j: Expr, n: int) -> Expr:
    if mode == "edge" or (mode == "reflect" and n == 1):
        return clamp(j, 0, n - 1)
    if mode == "reflect":  # mirror without repeating the edge (valid while pads < n)
        return idx(n - 1) - call("abs", idx(n - 1) - call("abs", j))
    return call("floormod", j, idx(n))  # wrap


@lowering("Pad")
def pad(cx: OpContext) -> Outputs:
    x = cx.input(0)
    mode = cx.attr("mode", "constant")
    pads = cx.ints_from("pads", 1, "pads") or []
    axes = [cx.axis(a, x.rank) for a in (cx.ints_from("axes", 3, "axes") or range(x.rank))]
    if len(pads) != 2 * len(axes):
        raise cx.error(f"pads {pads} do not match {len(axes)} axes")
    before, after = [0] * x.rank, [0] * x.rank
    for k, d in enumerate(axes):
        before[d], after[d] = pads[k], pads[k + len(axes)]
    shape = [n + b + a for n, b, a in zip(x.shape, before, after, strict=True)]
    if any(s < 0 for s in shape):
        raise cx.error(f"pads {pads} crop more than the input")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise cx.unsupported(f"pad mode {mode!r}")
    if mode == "reflect" and any(max(before[d], after[d]) >= x.shape[d] > 1 for d in range(x.rank)):
        raise cx.unsupported("reflect padding wider than the input")
    if mode != "constant" and any(x.shape[d] == 0 and shape[d] > 0 for d in range(x.rank)):
        raise cx.error(f"cannot {mode}-pad an empty axis")
    value = cx.const_input(2, "constant_value")
    fill_value = (float(cx.attr("value", 0.0)) if value is None else np.asarray(value).reshape(-1)[0].item())
    i = out_index(x.rank)
    j = [i[d] - idx(before[d]) for d in range(x.rank)]
    if mode == "constant":
        padded = any(b > 0 for b in before) or any(a > 0 for a in after)
        body = load(0, x, j, pad=fill_value if padded else None)
    else:
        at = [j[d] if before[d] <= 0 and after[d] <= 0 else _pad_index(mode, j[d], x.shape[d])
              for d in range(x.rank)]
        body = load(0, x, at)
    return [cx.emit(compute(shape, body, [x]), [x])]


@lowering("DepthToSpace")
def depth_to_space(cx: OpContext) -> Outputs:
    x = cx.input(0)
    b = int(cx.attr("blocksize"))
    n, c, h, w = x.shape
    if c % (b * b):
        raise cx.error(f"channels {c} not divisible by blocksize^2 = {b * b}")
    co = c // (b * b)

    def index(i: list[Expr]) -> list[Expr]:
        bh, bw = call("floormod", i[2], idx(b)), call("floormod", i[3], idx(b))
        if cx.attr("mode", "DCR") == "CRD":
            ch = i[1] * idx(b * b) + bh * idx(b) + bw
        else:
            ch = (bh * idx(b) + bw) * idx(co) + i[1]
        return [i[0], ch, call("floordiv", i[2], idx(b)), call("floordiv", i[3], idx(b))]

    return [gather_copy(cx, x, (n, co, h * b, w * b), index)]


@lowering("SpaceToDepth")
def space_to_depth(cx: OpContext) -> Outputs:
    x = cx.input(0)
    b = int(cx.attr("blocksize"))
    n, c, h, w = x.shape
    if h % b or w % b:
        raise cx.error(f"spatial dims {h}x{w} not divisible by blocksize {b}")

    crd = cx.attr("mode", "DCR") == "CRD"

    def index(i: list[Expr]) -> list[Expr]:
        # DCR: out channel = block * C + c; CRD: out channel = c * b*b + block
        blk = call("floormod", i[1], idx(b * b)) if crd else call("floordiv", i[1], idx(c))
        ch = call("floordiv", i[1], idx(b * b)) if crd else call("floormod", i[1], idx(c))
        return [i[0], ch,
                i[2] * idx(b) + call("floordiv", blk, idx(b)), i[3] * idx(b) + call("floormod", blk, idx(b))]

    return [gather_copy(cx, x, (n, c * b * b, h // b, w // b), index)]


@lowering("Trilu")
def trilu(cx: OpContext) -> Outputs:
    x = cx.input(0)
    k = cx.const_input(1, "k")
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    i = out_index(x.rank)
    keep = call("ge" if cx.attr("upper", 1) else "le", i[-1] - i[-2], idx(k))
    body = select(keep, load(0, x, i), scalar(0, x.dtype))
    return [cx.emit(compute(x.shape, body, [x]), [x])]


@lowering("GatherND")
def gather_nd(cx: OpContext) -> Outputs:
    x, ind = cx.input(0), cx.input(1)
    b = int(cx.attr("batch_dims", 0))
    k = ind.shape[-1]
    if b + k > x.rank or ind.shape[:b] != x.shape[:b]:
        raise cx.error(f"indices {list(ind.shape)} do not fit data {list(x.shape)} with batch_dims {b}")
    lead = ind.shape[:-1]
    shape = (*lead, *x.shape[b + k:])
    i = out_index(len(shape))
    picked = [element_index(load(1, ind, [*i[:len(lead)], idx(j)]), x.shape[b + j]) for j in range(k)]
    at = [*i[:b], *picked, *i[len(lead):]]
    return [cx.emit(compute(shape, load(0, x, at), [x, ind]), [x, ind])]


@lowering("OneHot")
def one_hot(cx: OpContext) -> Outputs:
    ind, values = cx.input(0), cx.input(2)
    depth = int(np.asarray(cx.const_input(1, "depth")).reshape(-1)[0])
    axis = cx.attr("axis", -1)
    axis = axis + ind.rank + 1 if axis < 0 else axis
    if not 0 <= axis <= ind.rank:
        raise cx.error(f"axis {cx.attr('axis')} out of range")
    shape = (*ind.shape[:axis], depth, *ind.shape[axis:])
    i = out_index(len(shape))
    v = cast(load(0, ind, [*i[:axis], *i[axis + 1:]]), INDEX)
    v = select(call("lt", v, idx(0)), v + idx(depth), v)
    body = select(call("eq", v, i[axis]), load(1, values, [idx(1)]), load(1, values, [idx(0)]))
    return [cx.emit(compute(shape, body, [ind, values]), [ind, values])]


@lowering("ReverseSequence")
def reverse_sequence(cx: OpContext) -> Outputs:
    x, lens = cx.input(0), cx.input(1)
    t_axis, b_axis = cx.axis(cx.attr("time_axis", 0), x.rank), cx.axis(cx.attr("batch_axis", 1), x.rank)
    i = out_index(x.rank)
    n = cast(load(1, lens, [i[b_axis]]), INDEX)
    t = i[t_axis]
    src = clamp(select(call("lt", t, n), n - idx(1) - t, t), 0, x.shape[t_axis] - 1)
    at = [src if d == t_axis else i[d] for d in range(x.rank)]
    return [cx.emit(compute(x.shape, load(0, x, at), [x, lens]), [x, lens])]
