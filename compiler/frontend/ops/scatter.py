"""ScatterElements / ScatterND: each output element reduces over the updates that land on it.

The updates are few and the work is output x updates, but it keeps every
kernel a plain Compute; with reduction "none" the last update wins, found
as the largest update position that lands on the element.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from compiler.frontend.exprs import clamp, compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.movement import element_index
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import INDEX
from compiler.ir.te import ACC, INIT, Expr, Var, call, cast, select

# reduction -> (TE reduce op, how the reduced updates combine with the original element)
_COMBINE: dict[str, tuple[str, Callable[[Expr, Expr], Expr]]] = {
    "add": ("sum", lambda acc, x: acc + x),
    "mul": ("prod", lambda acc, x: acc * x),
    "max": ("max", lambda acc, x: call("max", acc, x)),
    "min": ("min", lambda acc, x: call("min", acc, x)),
}


def _scatter(cx: OpContext, data: Value, inputs: list[Value], extents: list[int],
             lands: Callable[[list[Expr], list[Expr]], Expr], update: Callable[[list[Expr], list[Expr]], Expr]
             ) -> Value:
    """out[i] = data[i] combined with every update j where lands(i, j); update(i, j) reads it."""
    reduction = cx.attr("reduction", "none")
    i = out_index(data.rank)
    r = reduce_index(len(extents))
    original = load(0, data, i)
    if reduction in _COMBINE:
        op, combine = _COMBINE[reduction]
        neutral = scalar(INIT[op](data.dtype) if op in ("max", "min") else (0 if op == "sum" else 1), original)
        body = select(lands(i, r), update(i, r), neutral)
        post = combine(Var(ACC, original.dtype), original)
        return cx.emit(compute(data.shape, body, inputs, reduce=extents, reduce_op=op, post=post), inputs)
    if reduction != "none":
        raise cx.unsupported(f"reduction {reduction!r}")
    flat: Expr = idx(0)
    for k, n in enumerate(extents):
        flat = flat * idx(n) + r[k]
    last = cx.emit(compute(data.shape, select(lands(i, r), flat, idx(-1)), inputs, reduce=extents,
                           reduce_op="max"), inputs)
    w = load(len(inputs), last, i)
    pos = call("max", w, idx(0))
    strides = [math.prod(extents[k + 1:]) for k in range(len(extents))]
    j = [call("floormod", call("floordiv", pos, idx(s)), idx(n)) for s, n in zip(strides, extents, strict=True)]
    body = select(call("ge", w, idx(0)), update(i, j), original)
    return cx.emit(compute(data.shape, body, [*inputs, last]), [*inputs, last])


@lowering("ScatterElements", "Scatter")
def scatter_elements(cx: OpContext) -> Outputs:
    data, ind, upd = cx.input(0), cx.input(1), cx.input(2)
    axis = cx.axis(cx.attr("axis", 0), data.rank)
    if ind.shape != upd.shape or ind.rank != data.rank:
        raise cx.error(f"indices {list(ind.shape)} and updates {list(upd.shape)} do not fit data")

    def at(i: list[Expr], j: list[Expr]) -> list[Expr]:
        return [j[0] if d == axis else clamp(i[d], 0, ind.shape[d] - 1) for d in range(data.rank)]

    def lands(i: list[Expr], j: list[Expr]) -> Expr:
        hit = call("eq", element_index(load(1, ind, at(i, j)), data.shape[axis]), i[axis])
        for d in range(data.rank):
            if d != axis and ind.shape[d] < data.shape[d]:
                hit = call("and", hit, call("lt", i[d], idx(ind.shape[d])))
        return hit

    return [_scatter(cx, data, [data, ind, upd], [ind.shape[axis]], lands, lambda i, j: load(2, upd, at(i, j)))]


@lowering("ScatterND")
def scatter_nd(cx: OpContext) -> Outputs:
    data, ind, upd = cx.input(0), cx.input(1), cx.input(2)
    k = ind.shape[-1]
    lead = list(ind.shape[:-1])
    if upd.shape != (*lead, *data.shape[k:]):
        raise cx.error(f"updates {list(upd.shape)} do not fit indices {list(ind.shape)} and data")

    def lands(i: list[Expr], j: list[Expr]) -> Expr:
        hit: Expr | None = None
        for t in range(k):
            eq = call("eq", element_index(load(1, ind, [*j, idx(t)]), data.shape[t]), i[t])
            hit = eq if hit is None else call("and", hit, eq)
        assert hit is not None
        return hit

    return [_scatter(cx, data, [data, ind, upd], lead or [1], lands,
                     lambda i, j: load(2, upd, [*(j if lead else []), *i[k:]]))]


@lowering("TensorScatter")
def tensor_scatter(cx: OpContext) -> Outputs:
    """A KV-cache write: update's rows land at write_indices[batch] (+ row), modulo the cache in circular mode."""
    past, upd, where = cx.input(0), cx.input(1), cx.optional(2)
    axis = cx.axis(cx.attr("axis", -2), past.rank)
    if upd.rank != past.rank or any(upd.shape[d] != past.shape[d] for d in range(past.rank) if d != axis):
        raise cx.error(f"update {list(upd.shape)} does not fit the cache {list(past.shape)}")
    length, rows = past.shape[axis], upd.shape[axis]
    i = out_index(past.rank)
    inputs = [past, upd, *([where] if where is not None else [])]
    start = cast(load(2, where, [i[0]]), INDEX) if where is not None else idx(0)
    row = i[axis] - start
    if cx.attr("mode", "linear") == "circular":
        row = call("floormod", row, idx(length))
    inside = call("and", call("ge", row, idx(0)), call("lt", row, idx(rows)))
    new = load(1, upd, [*i[:axis], clamp(row, 0, rows - 1), *i[axis + 1:]])
    return [cx.emit(compute(past.shape, select(inside, new, load(0, past, i)), inputs), inputs)]
