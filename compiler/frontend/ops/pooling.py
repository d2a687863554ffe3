"""Pooling: MaxPool, AveragePool, LpPool and their global forms, each one reduce Compute."""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.windows import Window, window_of
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import dtype
from compiler.ir.te import ACC, INIT, Expr, Var, call, select


def _window(cx: OpContext, x: Value) -> Window:
    if x.rank < 3:
        raise cx.error(f"input {list(x.shape)} has no spatial dims")
    kernel = cx.attr("kernel_shape")
    if kernel is None:
        raise cx.error("kernel_shape is required")
    return window_of(cx, x.shape[2:], kernel, bool(cx.attr("ceil_mode", 0)))


def _window_loads(x: Value, w: Window, pad: float | int | None) -> tuple[list[Expr], Expr]:
    nd = x.rank - 2
    i = out_index(x.rank)
    r = reduce_index(nd)
    at = [i[0], i[1], *(w.position(d, i[2 + d], r[d]) for d in range(nd))]
    return i, load(0, x, at, pad=pad if w.reads_outside(x.shape[2:]) else None)


@lowering("MaxPool")
def max_pool(cx: OpContext) -> Outputs:
    x = cx.input(0)
    w = _window(cx, x)
    _, body = _window_loads(x, w, INIT["max"](x.dtype))
    shape = (*x.shape[:2], *w.out)
    pooled = cx.emit(compute(shape, body, [x], reduce=w.taps(x.shape[2:]), reduce_op="max"), [x])
    indices = _argmax_indices(cx, x, w, pooled) if cx.num_outputs > 1 else None
    return [pooled, indices]


def _argmax_indices(cx: OpContext, x: Value, w: Window, pooled: Value) -> Value:
    """MaxPool's Indices: the flat input offset of each window's first maximum."""
    nd = x.rank - 2
    spatial = x.shape[2:]
    # offsets inside one (n, c) plane: row-major, or column-major with storage_order=1
    order = range(nd) if cx.attr("storage_order", 0) else range(nd - 1, -1, -1)
    stride, plane = [0] * nd, 1
    for d in order:
        stride[d] = plane
        plane *= spatial[d]
    i = out_index(x.rank)
    r = reduce_index(nd)
    pos = [w.position(d, i[2 + d], r[d]) for d in range(nd)]
    flat: Expr = (i[0] * idx(x.shape[1]) + i[1]) * idx(plane)
    inside: Expr | None = None
    for d in range(nd):
        flat = flat + pos[d] * idx(stride[d])
        ok = call("and", call("ge", pos[d], idx(0)), call("lt", pos[d], idx(spatial[d])))
        inside = ok if inside is None else call("and", inside, ok)
    v = load(0, x, [i[0], i[1], *pos], pad=INIT["max"](x.dtype) if w.reads_outside(spatial) else None)
    hit = call("eq", v, load(1, pooled, i))
    if inside is not None and w.reads_outside(spatial):
        hit = call("and", hit, inside)
    body = select(hit, flat, idx(math.prod(x.shape)))
    return cx.emit(compute(pooled.shape, body, [x, pooled], reduce=w.taps(x.shape[2:]), reduce_op="min"), [x, pooled])


def _window_counts(x: Value, w: Window, include_pad: bool) -> list[np.ndarray] | int:
    """Taps each window averages over: a constant when every window is whole, else per
    spatial dim the count at each output position (the product over dims is a window's),
    computed here from the static shapes so that the kernel divides by loaded values
    (its explicit-SIMD path cannot evaluate the clamps of an index expression: a padded
    3x3 AveragePool ran at 0.3x onnxruntime)."""
    spatial = x.shape[2:]
    if not w.reads_outside(spatial):
        return math.prod(w.kernel)
    counts = []
    for d, n in enumerate(spatial):
        offset, limit = (0, n + w.pad_begin[d] + w.pad_end[d]) if include_pad else (w.pad_begin[d], n)
        at = (np.arange(w.out[d])[:, None] * w.strides[d] - offset
              + np.arange(w.kernel[d])[None, :] * w.dilations[d])
        counts.append(((at >= 0) & (at < limit)).sum(axis=1).astype(x.dtype))
    return counts


@lowering("AveragePool")
def average_pool(cx: OpContext) -> Outputs:
    x = cx.input(0)
    if not dtype(x.dtype).is_float:
        raise cx.unsupported(f"element type {x.dtype}")
    w = _window(cx, x)
    i, body = _window_loads(x, w, 0.0)
    counts = _window_counts(x, w, bool(cx.attr("count_include_pad", 0)))
    shape = (*x.shape[:2], *w.out)
    tables = [] if isinstance(counts, int) else [cx.constant(c) for c in counts]
    divisor: Expr = scalar(counts, x.dtype) if isinstance(counts, int) else load(1, tables[0], [i[2]])
    for d in range(1, len(tables)):
        divisor = divisor * load(1 + d, tables[d], [i[2 + d]])
    inputs = [x, *tables]
    post = Var(ACC, x.dtype) / divisor
    return [cx.emit(compute(shape, body, inputs, reduce=w.taps(x.shape[2:]), reduce_op="sum", post=post), inputs)]


@lowering("LpPool")
def lp_pool(cx: OpContext) -> Outputs:
    x = cx.input(0)
    p = float(cx.attr("p", 2))
    w = _window(cx, x)
    _, v = _window_loads(x, w, 0.0)
    body = call("pow", call("abs", v), scalar(p, v))
    post = call("pow", Var(ACC, x.dtype), scalar(1.0 / p, x.dtype))
    shape = (*x.shape[:2], *w.out)
    return [cx.emit(compute(shape, body, [x], reduce=w.taps(x.shape[2:]), reduce_op="sum", post=post), [x])]


@lowering("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(cx: OpContext) -> Outputs:
    x = cx.input(0)
    if x.rank < 3:
        raise cx.error(f"input {list(x.shape)} has no spatial dims")
    nd = x.rank - 2
    i = out_index(2)
    v = load(0, x, [*i, *reduce_index(nd)])
    acc = Var(ACC, x.dtype)
    if cx.op == "GlobalMaxPool":
        body, op, post = v, "max", None
    elif cx.op == "GlobalAveragePool":
        body, op, post = v, "sum", acc / scalar(math.prod(x.shape[2:]), x.dtype)
    else:
        p = float(cx.attr("p", 2))
        body, op = call("pow", call("abs", v), scalar(p, v)), "sum"
        post = call("pow", acc, scalar(1.0 / p, x.dtype))
    pooled = cx.emit(compute(x.shape[:2], body, [x], reduce=x.shape[2:], reduce_op=op, post=post), [x])
    return [cx.view(pooled, (*x.shape[:2], *[1] * nd))]
