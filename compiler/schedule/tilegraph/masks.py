"""Constant masks read as the index comparisons they encode.

Exporters fold a causal mask into a constant: a boolean [queries, keys] triangle (Trilu,
or Range and Greater, folded) or an additive float one (0 on and below the diagonal, a
large negative fill above); a padding mask without padding becomes zeros. Read as data
it costs a load per score and hides its structure. Written as what it is,
`key > query + offset`, it costs a compare, runs on vectors, and lets the attention
kernel see which key blocks are wholly masked (compiler/ir/attention.py's `causal`):
tile-level knowledge of what a tile needs, as Welder's propagation reads it from indices.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from compiler.ir.graph import Graph, Node
from compiler.ir.te import Compute, Expr, Load, TensorType, call, const, remap_loads, substitute

_MAX_ELEMENTS = 1 << 24  # larger constants are left as data: reading them costs compile time


def fold_constant_masks(graph: Graph, node: Node) -> Node:
    """`node` with each constant input that is a diagonal step over its last two dimensions
    (the same in every slice of the leading ones) read as the comparison it encodes, and
    no longer an input."""
    slot = len(node.inputs) - 1
    while slot >= 0:  # from the last: dropping a slot renumbers only those after it
        step = _step(graph, node.inputs[slot])
        if step is not None:
            compute = _without_input(_read_as(node.compute, slot, step), slot)
            node = replace(node, compute=compute, inputs=node.inputs[:slot] + node.inputs[slot + 1:])
        slot -= 1
    return node


def _step(graph: Graph, tid: int) -> tuple[int, object, object, str] | None:
    """(offset, value above, value on and below, dtype) when tensor `tid` is a constant whose
    [.., x, y] is the first value where y > x + offset, else the second; None otherwise."""
    t = graph.tensors[tid]
    data = graph.tensors[graph.storage_of(tid)].data
    if data is None or len(t.shape) < 2 or data.size > _MAX_ELEMENTS or data.size == 0:
        return None
    slices = np.asarray(data).reshape(-1, *t.shape[-2:])
    m = slices[0]
    if not (slices == m).all() or (m.dtype.kind == "f" and np.isnan(m).any()):
        return None
    rows, cols = m.shape
    above, below = m[0, cols - 1], m[rows - 1, 0]
    # the first row's trailing values equal to the top-right corner's are the ones above
    first = m[0] == above
    count = int(np.argmin(first[::-1])) if not first.all() else cols
    offset = cols - 1 - count if above != below else cols - 1  # one value throughout: nothing above
    diff = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    if not np.array_equal(m, np.where(diff > offset, above, below).astype(m.dtype)):
        return None
    return offset, above.item(), below.item(), t.dtype


def _read_as(c: Compute, slot: int, step: tuple[int, object, object, str]) -> Compute:
    """`c` (its stages too) with every load of input `slot` written as `step`'s comparison
    of the load's last two indices."""
    offset, above, below, dt = step

    def fn(x: Expr) -> Expr | None:
        if not (isinstance(x, Load) and x.input == slot):
            return None
        if above == below:
            return const(above, dt)  # type: ignore[arg-type]
        later = call("gt", x.indices[-1], call("add", x.indices[-2], offset))
        if dt == "bool":
            return later if above else call("le", x.indices[-1], call("add", x.indices[-2], offset))
        return call("select", later, const(above, dt), const(below, dt))  # type: ignore[arg-type]

    def rewrite(m: Compute) -> Compute:
        post = None if m.post is None else substitute(m.post, fn)
        return replace(m, body=substitute(m.body, fn), post=post)

    return replace(rewrite(c), stages=tuple(rewrite(s) for s in c.stages))


def _without_input(c: Compute, slot: int) -> Compute:
    """Group `c` with input `slot`, read nowhere any more, dropped (later slots renumbered)."""
    total = len(c.inputs) + len(c.stages)
    mapping = [k if k < slot else k - 1 for k in range(total)]
    inputs = c.inputs[:slot] + c.inputs[slot + 1:]

    def moved(m: Compute) -> Compute:
        post = None if m.post is None else remap_loads(m.post, mapping)
        return replace(m, body=remap_loads(m.body, mapping), post=post)

    stages: list[Compute] = []
    for s in c.stages:
        stages.append(replace(moved(s), inputs=(*inputs, *(TensorType(x.shape, x.dtype) for x in stages))))
    return replace(moved(c), inputs=inputs, stages=tuple(stages))
