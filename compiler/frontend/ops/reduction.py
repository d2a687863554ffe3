"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, ArgMax/ArgMin, CumSum.

The reduced dims become reduce axes r0.. in their original order, so a
reduction over the last axis keeps the reduce axis innermost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.te import ACC, Expr, Var, call, select


@dataclass(frozen=True)
class ReduceIndex:
    """Index variables of a reduction over `axes` of a rank-`rank` tensor."""

    rank: int
    axes: tuple[int, ...]

    @property
    def kept(self) -> list[int]:
        return [d for d in range(self.rank) if d not in self.axes]

    def full(self) -> list[Expr]:
        """Index of an input element: kept dims take i0.., reduced dims r0.."""
        i, r = out_index(len(self.kept)), reduce_index(len(self.axes))
        return [r[self.axes.index(d)] if d in self.axes else i[self.kept.index(d)] for d in range(self.rank)]

    def out(self) -> list[Expr]:
        return out_index(len(self.kept))


def reduce_values(
    cx: OpContext,
    inputs: Sequence[Value],
    axes: Sequence[int],
    op: str,
    body: Callable[[list[Expr]], Expr],
    post: Callable[[Expr, list[Expr]], Expr] | None = None,
) -> Value:
    """A reduction over `axes` of inputs[0]'s shape; the result has the kept dims only.

    `body(full_index)` gives the reduced term, `post(acc, out_index)` the epilogue.
    """
    x = inputs[0]
    ri = ReduceIndex(x.rank, tuple(sorted(axes)))
    term = body(ri.full())
    epilogue = None if post is None else post(Var(ACC, term.dtype), ri.out())
    shape = [x.shape[d] for d in ri.kept]
    c = compute(shape, term, inputs, reduce=[x.shape[d] for d in ri.axes], reduce_op=op, post=epilogue)
    return cx.emit(c, inputs)


def kept_index(full: list[Expr], axes: Sequence[int]) -> list[Expr]:
    """The entries of a full index on the dims a reduction over `axes` kept."""
    return [e for d, e in enumerate(full) if d not in axes]


def reduction_axes(cx: OpContext, x: Value) -> list[int] | None:
    """The axes to reduce (attribute or input form); None means nothing to do (noop)."""
    axes = cx.ints_from("axes", 1, "axes")
    if not axes:
        if cx.attr("noop_with_empty_axes", 0):
            return None
        return list(range(x.rank))
    out = sorted({cx.axis(a, x.rank) for a in axes})
    return out


def keep_dims(cx: OpContext, x: Value, reduced: Value, axes: Sequence[int]) -> Value:
    if not cx.attr("keepdims", 1):
        return reduced
    return cx.view(reduced, [1 if d in axes else n for d, n in enumerate(x.shape)])


def _mean_post(n: int) -> Callable[[Expr, list[Expr]], Expr]:
    return lambda acc, i: acc / scalar(n, acc)


# op -> (reduce op, term, epilogue given the reduced element count)
SIMPLE: dict[str, tuple[str, Callable[[Expr], Expr], Callable[[int], Callable | None]]] = {
    "ReduceSum": ("sum", lambda v: v, lambda n: None),
    "ReduceMean": ("sum", lambda v: v, _mean_post),
    "ReduceMax": ("max", lambda v: v, lambda n: None),
    "ReduceMin": ("min", lambda v: v, lambda n: None),
    "ReduceProd": ("prod", lambda v: v, lambda n: None),
    "ReduceL1": ("sum", lambda v: call("abs", v), lambda n: None),
    "ReduceL2": ("sum", lambda v: v * v, lambda n: lambda acc, i: call("sqrt", acc)),
    "ReduceSumSquare": ("sum", lambda v: v * v, lambda n: None),
    "ReduceLogSum": ("sum", lambda v: v, lambda n: lambda acc, i: call("log", acc)),
}


@lowering(*SIMPLE)
def simple_reduce(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axes = reduction_axes(cx, x)
    if axes is None:
        return [x]
    op, term, post = SIMPLE[cx.op]
    n = math.prod(x.shape[d] for d in axes)
    out = reduce_values(cx, [x], axes, op, lambda full: term(load(0, x, full)), post(n))
    return [keep_dims(cx, x, out, axes)]


@lowering("ReduceLogSumExp")
def reduce_log_sum_exp(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axes = reduction_axes(cx, x)
    if axes is None:
        return [x]
    m = reduce_values(cx, [x], axes, "max", lambda full: load(0, x, full))
    # a row of -inf (or an empty reduction) has max -inf: shift by 0 there instead
    out = reduce_values(
        cx, [x, m], axes, "sum",
        lambda full: call("exp", load(0, x, full) - _finite(load(1, m, kept_index(full, axes)))),
        lambda acc, i: call("log", acc) + _finite(load(1, m, i)))
    return [keep_dims(cx, x, out, axes)]


def _finite(v: Expr) -> Expr:
    return select(call("isinf", v), scalar(0, v), v)


@lowering("ArgMax", "ArgMin")
def arg_extreme(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axis = cx.axis(cx.attr("axis", 0), x.rank)
    op = "max" if cx.op == "ArgMax" else "min"
    best = reduce_values(cx, [x], [axis], op, lambda full: load(0, x, full))
    n = x.shape[axis]
    last = bool(cx.attr("select_last_index", 0))

    def position(full: list[Expr]) -> Expr:
        hit = call("eq", load(0, x, full), load(1, best, kept_index(full, [axis])))
        return select(hit, full[axis], idx(-1 if last else n))

    pos = reduce_values(cx, [x, best], [axis], "max" if last else "min", position)
    return [keep_dims(cx, x, pos, [axis])]


@lowering("CumSum", "CumProd")
def cumulative(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axis = cx.axis(int(np.asarray(cx.const_input(1, "axis")).reshape(-1)[0]), x.rank)
    exclusive, reverse = cx.attr("exclusive", 0), cx.attr("reverse", 0)
    i = out_index(x.rank)
    (r,) = reduce_index(1)
    cmp = {(0, 0): "le", (1, 0): "lt", (0, 1): "ge", (1, 1): "gt"}[(exclusive, reverse)]
    v = load(0, x, [*i[:axis], r, *i[axis + 1:]])
    op, neutral = ("sum", 0) if cx.op == "CumSum" else ("prod", 1)
    body = select(call(cmp, r, i[axis]), v, scalar(neutral, v))
    return [cx.emit(compute(x.shape, body, [x], reduce=[x.shape[axis]], reduce_op=op), [x])]

