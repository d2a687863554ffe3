"""Attention connected across its two contractions (Welder's tile-graph through a softmax).

After register fusion an attention is six kernels: the scores S = Q K (scale and mask
in its epilogue), the softmax's max, exp, sum and scale (a row group otherwise), and
O = P V, every score matrix crossing DRAM twice. Welder connects them at tile level: a
block of query rows of O needs the same rows of P, of E and of S, and all of Q's
rows there; the key axis is reduced, so its blocks stream. With the softmax rewritten
online (a running max and sum, the accumulator rescaled as the max grows:
compiler/codegen/c/attention.py), one kernel walks the key blocks and no score reaches
memory, at any sequence length.

The chain is found at the graph level, by what the nodes compute, never by op names:
from every contraction O, back through its operand P to the softmax's stages and to the
contraction S they read; the six become one group (a Compute with stages) when every
intermediate is read only inside it and `compiler.ir.attention.match_attention`
recognises the result. Anything else stays as it was. A constant mask the group reads
becomes the index comparison it encodes (compiler/schedule/tilegraph/masks.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from compiler.ir.attention import Attention, match_attention
from compiler.ir.contraction import match_contraction
from compiler.ir.graph import Graph, Node, TensorKind
from compiler.ir.te import Var, rename_vars
from compiler.schedule.tilegraph.broadcast import drop_unread_copies, is_copy, read_through_copy
from compiler.schedule.tilegraph.groups import GroupLog, Level
from compiler.schedule.tilegraph.masks import fold_constant_masks
from compiler.schedule.tilegraph.rows import merge_nodes, put_in_place


def fuse_attention(graph: Graph, log: GroupLog | None = None,
                   fits: Callable[[Attention], bool] | None = None) -> Graph:
    """Merge every attention chain of `graph` into one fused group, in place; `log` records
    each group (with the copies it reads through and the one it writes through) and may
    refuse one (split back after measuring, or priced slower); `fits`, when given, says
    which the backend has a kernel for (a GPU block's rows must fit shared memory)."""
    made: list[tuple[Node, list[Node], set[int]]] = []  # group, its parts, the copies it reads through
    for sink in list(reversed(graph.nodes)):
        if match_contraction(sink.compute) is None:
            continue
        members = _chain(graph, sink)
        if members is None:
            continue
        node = merge_nodes(graph, members)
        recognised = match_attention(node.compute)
        if recognised is None or (fits is not None and not fits(recognised)):
            continue
        reading, node, through = _read_shared_heads(graph, members, node)
        parts, gone = list(members), list(members[:-1])
        folded = _fold_output_copy(graph, reading, node)
        if folded is not None:
            node, copy = folded
            parts.append(copy)
            gone.append(sink)
        node = fold_constant_masks(graph, node)
        if log is not None and not log.allows(Level.ATTENTION, parts, node.compute):
            continue
        if folded is not None:
            graph.nodes.remove(folded[1])
        put_in_place(graph, sink, node, gone)
        made.append((node, parts, through))
    dropped = drop_unread_copies(graph)
    if log is not None:
        for node, parts, through in made:
            log.record(Level.ATTENTION, [*parts, *(c for c in dropped if c.output in through)], node)
    for i, n in enumerate(graph.nodes):
        n.id = i
    return graph


def _read_shared_heads(graph: Graph, members: list[Node], group: Node) -> tuple[list[Node], Node, set[int]]:
    """The members and group with the scores and the output reading their operands
    through the copies that wrote them, by index (GQA's shared key and value heads), where
    it is still attention that way; and the outputs of the copies read through."""
    trial = list(members)
    through: set[int] = set()
    for k in (0, len(trial) - 1):  # the scores' product, the output's
        for slot in range(len(trial[k].inputs)):
            # through every copy in turn: repeat_kv's Expand, then the head split's Transpose
            while (node := read_through_copy(graph, trial[k], slot)) is not None:
                merged = merge_nodes(graph, [*trial[:k], node, *trial[k + 1:]])
                if match_attention(merged.compute) is None:
                    break
                through.add(graph.storage_of(trial[k].inputs[slot]))
                trial[k], group = node, merged
    return trial, group, through


def _fold_output_copy(graph: Graph, members: list[Node], group: Node) -> tuple[Node, Node] | None:
    """The group writing its output straight where the one copy reading it (the transpose
    merging the heads back) puts it, and that copy; None where there is no such copy or
    the group would no longer be attention."""
    sink = members[-1]
    readers = [n for n in graph.nodes if any(graph.storage_of(t) == sink.output for t in n.inputs)]
    if len(readers) != 1 or sink.output in {graph.storage_of(t) for t in graph.outputs}:
        return None
    copy = readers[0]
    if not is_copy(copy) or copy.inputs != (sink.output,):
        return None
    c, at = sink.compute, copy.compute.body.indices  # type: ignore[union-attr]
    names = {a.name for a in (*copy.compute.axes, *c.reduce_axes)}
    if not all(isinstance(x, Var) for x in at) or len(set(at)) != len(at) or len(names) != len(at) + 1:
        return None
    rename = dict(zip((a.name for a in c.axes), at, strict=True))
    moved = replace(c, axes=copy.compute.axes, body=rename_vars(c.body, rename))
    out = Node(sink.id, f"{sink.op}+{copy.op}", moved, sink.inputs, copy.output, sink.name)
    merged = merge_nodes(graph, [*members[:-1], out])
    return (merged, copy) if match_attention(merged.compute) is not None else None


def _chain(graph: Graph, sink: Node) -> list[Node] | None:
    """[S, max, exp, sum, P, sink] when `sink` reads a softmax of a contraction's output
    through intermediates no one else reads; None otherwise."""
    producers = {n.output: n for n in graph.nodes}
    readers: dict[int, int] = {}
    for n in graph.nodes:
        for t in n.inputs:
            readers[graph.storage_of(t)] = readers.get(graph.storage_of(t), 0) + 1
    protected = {graph.storage_of(t) for t in graph.outputs}

    def private(n: Node, reads: int) -> bool:
        """Whether `n`'s output is an intermediate read `reads` times, directly, in the chain."""
        t = n.output
        return (t not in protected and graph.tensors[t].kind == TensorKind.INTERMEDIATE
                and readers.get(t, 0) == reads)

    def made(n: Node) -> list[Node]:
        """The producers of `n`'s inputs read directly (not through a view)."""
        return [producers[t] for t in n.inputs if t in producers and graph.storage_of(t) == t]

    probs = [p for p in made(sink) if not p.compute.is_reduction and private(p, 1)]
    if len(probs) != 1:
        return None
    ez = made(probs[0])
    exps = [e for e in ez if not e.compute.is_reduction and private(e, 2)]
    total = [z for z in ez if z.compute.reduce_op == "sum" and private(z, 1)]
    if len(exps) != 1 or len(total) != 1:
        return None
    sm = made(exps[0])
    top = [m for m in sm if m.compute.reduce_op == "max" and private(m, 1)]
    scores = [s for s in sm if match_contraction(s.compute) is not None and private(s, 2)]
    if len(top) != 1 or len(scores) != 1:
        return None
    return [scores[0], top[0], exps[0], total[0], probs[0], sink]
