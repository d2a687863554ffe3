"""Reading a broadcast by index instead of through its copy (GQA / MQA's repeat_kv).

Exporters share a key / value head among several query heads by copying it:
Unsqueeze, Expand, Reshape (Llama's repeat_kv). The Expand is a kernel of its own
writing every head's copy, and the Reshape a view of it that register fusion does not
look through (a view changes the index map). A consumer that takes its operand by
index, like the attention kernel, reads the shared head instead: its loads of the view
become loads of the copy's source at the composed index (head h reads head h // group),
and the copy goes once nothing else reads it.

A copy may also scale what it moves by a constant (the dynamo exporter's attention
multiplies Q and K^T each by 1 / sqrt(sqrt(head size)) as it splits the heads): a
contraction reading one is linear in it, so the scale moves into its epilogue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from compiler.ir.contraction import match_contraction, scaled_sum
from compiler.ir.graph import Graph, Node
from compiler.ir.te import Call, Const, Expr, Load, TensorType, call, rename_vars, substitute


def read_through_copy(graph: Graph, node: Node, slot: int) -> Node | None:
    """`node` reading input `slot` from the source of the copy that wrote it (the input is a
    copy, or a view of one); None where it is not. The graph is unchanged: see
    `drop_unread_copies`."""
    t = node.inputs[slot]
    s = graph.storage_of(t)
    copy = next((n for n in graph.nodes if n.output == s), None)
    moved = None if copy is None else copied_load(copy)
    if moved is None:
        return None
    body, scale = moved
    if scale != 1.0 and match_contraction(node.compute) is None:
        return None
    source = copy.inputs[body.input]
    root = graph.storage_of(source)
    axes = [a.name for a in copy.compute.axes]

    def fn(x: Expr) -> Expr | None:
        if not (isinstance(x, Load) and x.input == slot):
            return None
        at = reshaped(x.indices, graph.tensors[t].shape, graph.tensors[s].shape)
        inner = tuple(rename_vars(i, dict(zip(axes, at, strict=True))) for i in body.indices)
        return Load(slot, reshaped(inner, graph.tensors[source].shape, graph.tensors[root].shape), x.dtype)

    c = node.compute if scale == 1.0 else scaled_sum(node.compute, scale)
    post = None if c.post is None else substitute(c.post, fn)
    types = list(c.inputs)
    types[slot] = TensorType(graph.tensors[root].shape, graph.tensors[root].dtype)
    return replace(node, compute=replace(c, body=substitute(c.body, fn), post=post, inputs=tuple(types)),
                   inputs=(*node.inputs[:slot], root, *node.inputs[slot + 1:]))


def drop_unread_copies(graph: Graph) -> list[Node]:
    """Remove the copies (and their views) that no node and no graph output reads any more
    (a copy read only by such a copy goes with it); returns them."""
    dropped: list[Node] = []
    while True:
        read = {graph.storage_of(x) for n in graph.nodes for x in n.inputs}
        read |= {graph.storage_of(o) for o in graph.outputs}
        dead = {n.output for n in graph.nodes if copied_load(n) is not None and n.output not in read}
        if not dead:
            return dropped
        dropped += [n for n in graph.nodes if n.output in dead]
        graph.nodes = [n for n in graph.nodes if n.output not in dead]
        for tid in [k for k in graph.tensors if graph.storage_of(k) in dead]:
            del graph.tensors[tid]


def is_copy(n: Node) -> bool:
    """Whether `n` only moves the elements of its one input (an Expand, a Transpose)."""
    moved = copied_load(n)
    return moved is not None and moved[1] == 1.0


def copied_load(n: Node) -> tuple[Load, float] | None:
    """The load by which `n` moves the elements of its one input, and the constant it
    multiplies them by (1.0: none); None where `n` does anything else."""
    c = n.compute
    if len(n.inputs) != 1 or c.is_reduction or c.post is not None:
        return None
    body, scale = c.body, 1.0
    if isinstance(body, Call) and body.op == "mul" and len(body.args) == 2:
        loads = [a for a in body.args if isinstance(a, Load)]
        consts = [a for a in body.args if isinstance(a, Const)]
        if len(loads) != 1 or len(consts) != 1 or not math.isfinite(float(consts[0].value)):
            return None
        body, scale = loads[0], float(consts[0].value)
    if not isinstance(body, Load) or body.pad is not None or body.dtype != c.dtype:
        return None
    return body, scale


def reshaped(idx: Sequence[Expr], shape: Sequence[int], base: Sequence[int]) -> tuple[Expr, ...]:
    """The indices into a row-major tensor of shape `base` of element `idx` of its view of
    shape `shape` (same element count). Dimensions are matched in groups of equal size, so
    a split or merge of dimensions costs a division only where it happens."""
    if tuple(shape) == tuple(base):
        return tuple(idx)
    src = [(i, n) for i, n in zip(idx, shape, strict=True) if n != 1]
    dst = [d for d, n in enumerate(base) if n != 1]
    out: list[Expr] = [Const(0, "int64")] * len(base)
    a = b = 0
    while a < len(src):
        group_src, group_dst = [src[a]], [dst[b]]
        a, b = a + 1, b + 1
        while math.prod(n for _, n in group_src) != math.prod(base[d] for d in group_dst):
            if math.prod(n for _, n in group_src) < math.prod(base[d] for d in group_dst):
                group_src.append(src[a])
                a += 1
            else:
                group_dst.append(dst[b])
                b += 1
        flat: Expr = Const(0, "int64")
        for i, n in group_src:
            flat = call("add", call("mul", flat, Const(n, "int64")), i)
        stride = math.prod(base[d] for d in group_dst)
        for d in group_dst:
            stride //= base[d]
            part = call("floordiv", flat, Const(stride, "int64")) if len(group_dst) > 1 else flat
            out[d] = call("floormod", part, Const(base[d], "int64")) if d != group_dst[0] else part
    return tuple(out)
