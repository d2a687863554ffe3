"""Cache-level connection of operators over shared rows (Welder's L1 / shared-memory edge).

After register-level fusion (fuse.py) a softmax is still four kernels (row max,
exp, row sum, scale) and a layer norm three, each streaming the whole tensor
through memory. They share their leading axes, the rows: every member reads
the others only at its own row. Such a chain becomes one kernel that walks the
rows in blocks and runs every member on the block, its intermediates in a
scratch that stays in cache (compiler/codegen/c/rows.py). Welder's tile
propagation is trivial here: a block of rows of the output needs exactly the
same block of rows of every member.

A group grows backwards from a sink: a producer joins when every reader of its
output is in the group, it is not a contraction (those keep their own GEMM
kernels), and the rows stay shared: every member's shape starts with the rows,
and every load of a member's output or of a row-indexed input reads its
leading dimensions at exactly the reader's row axes, the rest of its indices
free of them (inputs without the row axes, like LayerNorm's scale, are read
whole). A group needs a reduction (else register fusion would have done it)
and a row of everything it reads and writes by rows within `ROW_BYTES` of cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from compiler.ir.contraction import match_contraction
from compiler.ir.graph import Graph, Node, TensorKind
from compiler.ir.rows import RowSharing, row_bytes, row_sharing
from compiler.ir.te import Compute, Load, TensorType, remap_loads, walk
from compiler.schedule.tilegraph.groups import GroupLog, Level

ROW_BYTES = 64 << 10  # one row's intermediates, kept in L1 / L2 while its block runs
_MAX_INPUTS = 16
# Members a group grows to at most: each trial merges the group anew, so an unbounded
# chain (thousands of element-wise nodes before a softmax) would cost quadratic time;
# softmax and layer norm are 3 to 4 members after register fusion.
_MAX_MEMBERS = 32


RowFit = Callable[[Compute, RowSharing], bool]


def fits_cache(group: Compute, sharing: RowSharing) -> bool:
    """The CPU's rule: a row of everything the group reads and writes by rows within
    `ROW_BYTES` of cache."""
    return row_bytes(group, sharing) <= ROW_BYTES


def fuse_rows(graph: Graph, min_rows: int = 1, fits: RowFit = fits_cache,
              log: GroupLog | None = None) -> Graph:
    """Merge chains of row-sharing nodes into fused groups (Computes with stages), in place.

    Groups have at least `min_rows` rows (the CPU's cores: blocks of rows are the tasks,
    so fewer rows than cores would leave cores idle that separate kernels use), and a row
    of them passes `fits`. With a `log`, a group grown whole is offered to it (the cost
    check: refused, its members stay apart) and recorded in it once made."""
    protected = {graph.storage_of(t) for t in graph.outputs}
    grouped: set[int] = set()
    uses = _Uses(graph)
    # A group needs a reduction, and grows only backwards: sinks with none upstream of
    # them are skipped (long element-wise chains would otherwise be tried in vain).
    with_reduction = _reduction_upstream(graph)
    for sink in reversed(list(graph.nodes)):
        if id(sink) in grouped or id(sink) not in with_reduction:
            continue
        members = _grow(graph, uses, sink, protected, min_rows, fits)
        if members is None:
            continue
        node = merge_nodes(graph, members)
        if log is not None and not log.allows(Level.ROWS, members, node.compute):
            continue
        if log is not None:
            log.record(Level.ROWS, members, node)
        grouped.update(id(m) for m in members)
        put_in_place(graph, sink, node, members[:-1])
        uses = _Uses(graph)  # only a merge changes them: rebuilt per group, not per sink
    for i, node in enumerate(graph.nodes):
        node.id = i
    return graph


def _reduction_upstream(graph: Graph) -> set[int]:
    """Ids of the nodes that are reductions or read, directly or not, a reduction's output."""
    producers = {n.output: n for n in graph.nodes}
    found: set[int] = set()
    for n in graph.nodes:  # topological order: producers first
        if n.compute.is_reduction or any(
                id(producers[graph.storage_of(t)]) in found
                for t in n.inputs if graph.storage_of(t) in producers):
            found.add(id(n))
    return found


class _Uses:
    """Who produces and who reads each tensor of the graph, and the nodes' order."""

    def __init__(self, graph: Graph) -> None:
        self.producers = {n.output: n for n in graph.nodes}
        self.readers: dict[int, set[int]] = {}  # storage -> ids of the nodes reading it
        self.viewed: set[int] = set()  # storages read through a view: they must stay in memory
        for n in graph.nodes:
            for t in n.inputs:
                self.readers.setdefault(graph.storage_of(t), set()).add(id(n))
                if graph.storage_of(t) != t:
                    self.viewed.add(graph.storage_of(t))
        self.order = {id(n): k for k, n in enumerate(graph.nodes)}


def _grow(graph: Graph, uses: _Uses, sink: Node, protected: set[int], min_rows: int,
          fits: RowFit) -> list[Node] | None:
    """The members of the largest group ending at `sink` (topological order), or None."""
    members = [sink]
    changed = True
    while changed:
        changed = False
        for m in list(members):
            for t in m.inputs:
                p = uses.producers.get(t)
                if (p is None or p in members or t in protected or t in uses.viewed
                        or graph.tensors[t].kind != TensorKind.INTERMEDIATE
                        or not uses.readers[t] <= {id(x) for x in members}):
                    continue
                if len(members) >= _MAX_MEMBERS:
                    break
                trial = sorted([*members, p], key=lambda n: uses.order[id(n)])
                if _groupable(graph, trial, min_rows, fits):
                    members, changed = trial, True
    if len(members) < 2 or not any(m.compute.is_reduction for m in members):
        return None
    return members


def _groupable(graph: Graph, members: list[Node], min_rows: int, fits: RowFit) -> bool:
    """Whether the members share rows that pass `fits`."""
    if any(m.compute.stages or match_contraction(m.compute) is not None or _reads_padded(m.compute)
           for m in members):
        return False
    group = merge_nodes(graph, members).compute
    if len(group.inputs) > _MAX_INPUTS:
        return False
    sharing = row_sharing(group)
    if sharing is None or math.prod(group.shape[:sharing.rows]) < min_rows:
        return False
    return fits(group, sharing)


def _reads_padded(c: Compute) -> bool:
    """Whether `c` reads through padding (a pooling or convolution window): a kernel of its
    own copies such windows into padded scratch and runs them on vectors (c/stage.py),
    which a group member does not (YOLO's 5x5 max-pool chain ran scalar in a group,
    69% of the model's time)."""
    return any(isinstance(x, Load) and x.pad is not None for x in walk(c.body))


def put_in_place(graph: Graph, sink: Node, node: Node, gone: list[Node]) -> None:
    """`node` (a group merged from nodes of `graph`) takes `sink`'s place; the other nodes
    of `gone` leave the graph, and the tensors every node of `gone` wrote with them."""
    ids = {id(m) for m in gone}
    graph.nodes = [node if x is sink else x for x in graph.nodes if x is sink or id(x) not in ids]
    for m in gone:
        del graph.tensors[m.output]


def merge_nodes(graph: Graph, members: list[Node]) -> Node:
    """One node whose Compute has the members before the sink as stages."""
    outputs = [m.output for m in members]
    inputs: list[int] = []
    for m in members:
        inputs += [t for t in m.inputs if t not in outputs and t not in inputs]
    types = tuple(TensorType(graph.tensors[t].shape, graph.tensors[t].dtype) for t in inputs)
    position = {t: k for k, t in enumerate(inputs)}
    position.update({t: len(inputs) + k for k, t in enumerate(outputs[:-1])})
    stages: list[Compute] = []
    for k, m in enumerate(members):
        own = (*types, *(TensorType(s.shape, s.dtype) for s in stages))
        slots = [position[t] for t in m.inputs]
        post = None if m.compute.post is None else remap_loads(m.compute.post, slots)
        c = replace(m.compute, body=remap_loads(m.compute.body, slots), post=post, inputs=own)
        if k < len(members) - 1:
            stages.append(c)
    sink = members[-1]
    group = replace(c, inputs=types, stages=tuple(stages),
                    label="+".join(dict.fromkeys(x.compute.label for x in members if x.compute.label)))
    op = "+".join(m.op for m in members)
    return Node(sink.id, op, group, tuple(inputs), sink.output, sink.name)

