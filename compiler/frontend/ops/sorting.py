"""TopK: the k best elements along an axis, by ranking every element against the others
(output x axis work, no data-dependent control flow; ties keep the smaller index first)."""

from __future__ import annotations

from compiler.frontend.exprs import clamp, compute, idx, load, out_index, reduce_index
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.ir.te import call, select


@lowering("TopK")
def top_k(cx: OpContext) -> Outputs:
    x = cx.input(0)
    given = cx.ints_from("k", 1, "K")  # an attribute before opset 10
    if not given:
        raise cx.error("K is missing")
    k = given[0]
    axis = cx.axis(cx.attr("axis", -1), x.rank)
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise cx.error(f"K={k} out of range for axis of {n}")
    before = "gt" if cx.attr("largest", 1) else "lt"
    i = out_index(x.rank)
    (r,) = reduce_index(1)
    other = [*i[:axis], r, *i[axis + 1:]]
    a, b = load(0, x, other), load(0, x, i)
    # rank of element i: how many come before it (better value, or equal at a smaller index)
    ahead = call("or", call(before, a, b), call("and", call("eq", a, b), call("lt", r, i[axis])))
    rank = cx.emit(compute(x.shape, select(ahead, idx(1), idx(0)), [x], reduce=[n], reduce_op="sum"), [x])
    shape = (*x.shape[:axis], k, *x.shape[axis + 1:])
    position = select(call("eq", load(0, rank, other), i[axis]), r, idx(0))
    indices = cx.emit(compute(shape, position, [rank], reduce=[n], reduce_op="sum"), [rank])
    # clamped: with NaNs the ranks are no permutation, and a kernel must never read out of bounds
    at = [*i[:axis], clamp(load(1, indices, i), 0, n - 1), *i[axis + 1:]]
    values = cx.emit(compute(shape, load(0, x, at), [x, indices]), [x, indices])
    return [values, indices]
