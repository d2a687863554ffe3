"""If: a constant condition inlines its branch; a run-time one computes both branches
and selects element-wise, which needs both to give the same shapes."""

from __future__ import annotations

from compiler.frontend.exprs import elementwise
from compiler.frontend.registry import DataDependentShapeError, OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.te import select


@lowering("If")
def if_(cx: OpContext) -> Outputs:
    cond = cx.input(0)
    if cond.array is not None:
        return list(cx.lower_graph(cx.attr("then_branch" if bool(cond.array.reshape(-1)[0]) else "else_branch")))
    then, other = cx.lower_graph(cx.attr("then_branch")), cx.lower_graph(cx.attr("else_branch"))
    if any(t.shape != e.shape or t.dtype != e.dtype for t, e in zip(then, other, strict=True)):
        graph = cx.builder.graph
        name = graph.tensors[cond.tid].name if cond.tid in graph.inputs else None
        raise DataDependentShapeError(cx.op, cx.name, "data-dependent shape: the branches of a run-time "
                                      "condition give different shapes", name)
    scalar_cond = cx.view(cond, ())
    return [_choose(cx, scalar_cond, t, e) for t, e in zip(then, other, strict=True)]


def _choose(cx: OpContext, cond: Value, then: Value, other: Value) -> Value:
    inputs = [cond, then, other]
    return cx.emit(elementwise(inputs, lambda c, a, b: select(c, a, b)), inputs)
