"""Dropping what the outputs do not need: dead nodes, unused weights and views."""

from __future__ import annotations

from compiler.ir.graph import Graph, Node


def prune(g: Graph) -> Graph:
    """A copy of `g` with only the nodes and tensors its outputs depend on, renumbered in order.

    Every graph input is kept (it is part of the model's calling convention).
    """
    producer = g.producer()
    live: set[int] = set()
    stack = [g.storage_of(t) for t in g.outputs]
    while stack:
        n = producer.get(stack.pop())
        if n is None or n.id in live:
            continue
        live.add(n.id)
        stack.extend(g.storage_of(t) for t in n.inputs)
    out = Graph()
    remap: dict[int, int] = {}

    def copy(tid: int) -> int:
        if tid not in remap:
            t = g.tensors[tid]
            base = None if t.view_of is None else copy(t.view_of)
            remap[tid] = out.new_tensor(t.shape, t.dtype, t.kind, t.name, t.data, base).id
        return remap[tid]

    out.inputs = [copy(t) for t in g.inputs]
    for n in g.nodes:
        if n.id not in live:
            continue
        inputs = tuple(copy(t) for t in n.inputs)
        result = copy(n.output)
        out.nodes.append(Node(len(out.nodes), n.op, n.compute, inputs, result, n.name))
    out.outputs = [copy(t) for t in g.outputs]
    return out
