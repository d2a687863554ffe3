"""Control flow. If: a constant condition inlines its branch; a run-time one computes both
branches and selects element-wise, which needs both to give the same shapes. Scan and
Loop: unrolled, which needs a static length (and, for Loop, a constant condition)."""

from __future__ import annotations

import numpy as np

from compiler.frontend.exprs import elementwise
from compiler.frontend.ops.movement import slice_along, stack_values
from compiler.frontend.registry import DataDependentShapeError, OpContext, Outputs, lowering
from compiler.frontend.values import SequenceValue, Value
from compiler.ir.te import select


@lowering("If")
def if_(cx: OpContext) -> Outputs:
    cond = cx.input(0)
    if cond.array is not None:
        return list(cx.lower_graph(cx.attr("then_branch" if bool(cond.array.reshape(-1)[0]) else "else_branch")))
    then, other = cx.lower_graph(cx.attr("then_branch")), cx.lower_graph(cx.attr("else_branch"))
    if any(isinstance(v, SequenceValue) for v in (*then, *other)):
        raise cx.unsupported("sequences chosen by a condition known only at run time")
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


def _slice(cx: OpContext, v: Value, axis: int, t: int) -> Value:
    """Element t of `v` along `axis`, with that axis dropped."""
    return cx.view(slice_along(cx, v, axis, t, 1), v.shape[:axis] + v.shape[axis + 1:])


@lowering("Scan")
def scan(cx: OpContext) -> Outputs:
    """Unrolled over the (static) scan length."""
    if cx.opset < 9:
        raise cx.unsupported("Scan before opset 9 (batched, with sequence_lens)")
    body = cx.attr("body")
    m = int(cx.attr("num_scan_inputs"))
    values = [v for v in cx.inputs if v is not None]
    states, xs = values[:len(values) - m], values[len(values) - m:]
    in_axes = [cx.axis(a, x.rank) for a, x in zip(cx.attr("scan_input_axes", [0] * m), xs, strict=True)]
    in_dirs = list(cx.attr("scan_input_directions", [0] * m))
    lengths = {x.shape[a] for x, a in zip(xs, in_axes, strict=True)}
    if len(lengths) != 1:
        raise cx.error(f"scan inputs have different lengths {sorted(lengths)}")
    (steps,) = lengths
    cx.check_steps(steps)
    outs: list[list[Value]] = []
    for t in range(steps):
        slices = [_slice(cx, x, a, steps - 1 - t if rev else t) for x, a, rev in zip(xs, in_axes, in_dirs, strict=True)]
        result = cx.lower_graph(body, [*states, *slices])
        states = result[:len(states)]
        outs.append(result[len(states):])
    k = len(body.output) - len(states)
    out_axes = list(cx.attr("scan_output_axes", [0] * k))
    out_dirs = list(cx.attr("scan_output_directions", [0] * k))
    stacked = []
    for j in range(k):
        per_step = [o[j] for o in outs]
        if out_dirs[j]:
            per_step.reverse()
        stacked.append(stack_values(cx, per_step, cx.axis(out_axes[j], per_step[0].rank + 1)))
    return [*states, *stacked]


@lowering("Loop", takes_sequences=True)
def loop(cx: OpContext) -> Outputs:
    """Unrolled: the trip count must be a constant and the condition constant at every step."""
    body = cx.attr("body")
    trips, cond = cx.optional(0), cx.optional(1)
    limit = None if trips is None else int(cx.const_input(0, "trip count").reshape(-1)[0])
    carried = [v for v in cx.inputs[2:] if v is not None]
    going = True if cond is None else bool(cx.const_input(1, "condition").reshape(-1)[0])
    if limit is None:
        raise cx.unsupported("data-dependent shape: a Loop without a constant trip count")
    cx.check_steps(limit)
    scans: list[list[Value]] = []
    t = 0
    while going and t < limit:
        it = cx.constant(np.asarray(t, np.int64))
        result = cx.lower_graph(body, [it, cx.constant(np.asarray(going)), *carried])
        flag = result[0]
        if flag.array is None:
            raise cx.unsupported("data-dependent shape: the loop condition is only known at run time")
        going = bool(flag.array.reshape(-1)[0])
        carried = result[1:1 + len(carried)]
        scans.append(result[1 + len(carried):])
        t += 1
    k = len(body.output) - 1 - len(carried)
    if k and not scans:
        raise cx.unsupported("data-dependent shape: scan outputs of a loop that runs zero times")
    return [*carried, *(stack_values(cx, [s[j] for s in scans], 0) for j in range(k))]
