"""GraphTurbo's coarse partitioning: convolution chains sized by on-chip capacity.

A group's split factor is the smallest power of two v for which its peak live bytes
(per batch index: the tensors a member's run needs at once, in member order) divided
by v fit the L2 of one core. Groups grow backwards from a sink, one producer at a
time: a producer joins when every reader of its output is already in the group (so
straight chains and diamonds close; a branch's shared input stays a group input),
the members still form a chain (compiler/ir/chain.py: rows read at stride 1 or 2), and
the merged split factor does not exceed its members'. Repeated until nothing changes.

GraphTurbo stops groups at down-sampling. Here one down-sampling may sit inside a group
that is one inverted residual at most (expand at the full size, the strided member,
the projection: `_one_down_sampling`), since the tensor worth keeping in cache is the
expanded one the strided depthwise reads, and region inference (Welder) gives its rows
per tile (twice the tile's, plus the window). Measured on MobileNetV2's 16->96 block at
112x112 (2 threads): 309 us as one chain, 390 us as three kernels; onnxruntime 455 us.
Such groups are made in a first pass, before any other, so the next block's chain
cannot take their projection.

A group's instances (tiles of output rows) run depth-first (each tile through every
member, compiler/codegen/c/chain.py) or breadth-first (each member over the whole
map: separate kernels), whichever needs less memory; a group that gains nothing
depth-first is left as separate kernels, unless it is too small to repay starting
threads (a squeeze-excitation's two fully connected layers on a 1x1 map): one kernel on
the calling thread then does what several would, each one more call. A group is offered to the `GroupLog` (the cost
model prices it against its parts: compiler/schedule/chain_members.py `chain_candidate`
prices what the chain kernel really runs) and recorded there at level "L2 tiles", so the
measured split-back covers it like every other group.
"""

from __future__ import annotations

import math

from compiler.ir.chain import MAX_ROW_STRIDE, ROW, ChainShape, Span, chain_shape, task_spans
from compiler.ir.contraction import match_contraction
from compiler.ir.dtypes import dtype
from compiler.ir.graph import Graph, Node, TensorKind
from compiler.ir.te import Compute, loads_of
from compiler.schedule.chain_tiling import ChainTiling
from compiler.schedule.concat_in_place import placeable
from compiler.schedule.parallel import runs_serially
from compiler.schedule.tilegraph.groups import GroupLog, Level
from compiler.schedule.tilegraph.rows import merge_nodes, put_in_place
from compiler.target.base import Target

_MAX_INPUTS = 16
_MAX_MEMBERS = 8  # an inverted residual with its SE tail is 3 to 4 after register fusion
_MAX_DOWN_SAMPLING_MEMBERS = 3  # expand, strided depthwise, project


def split_factor(live_bytes: int, capacity: int) -> int:
    """The smallest power of two v with live_bytes / v <= capacity."""
    v = 1
    while live_bytes > v * capacity:
        v *= 2
    return v


def l2_bytes(target: Target) -> int:
    """On-chip buffer of one core: the L2 (the innermost level where there is none)."""
    names = {lv.name: lv.capacity for lv in target.levels}
    return names.get("l2", target.levels[-1].capacity)


def peak_live_bytes(c: Compute, shape: ChainShape, spans: tuple[Span, ...] | None = None) -> int:
    """Peak bytes live while the members of chain `c` run in order over one batch index
    (over each member's `spans` rows, default all): a member's output, the stages before
    it still to be read, and the group inputs read per batch index still to be read."""
    members = c.members()
    groups = len(c.inputs)
    rows = list(shape.member_rows) if spans is None else [s.count for s in spans]

    def nbytes(m: Compute, k: int) -> int:
        return math.prod(m.shape[1:]) // m.shape[ROW] * rows[k] * dtype(m.dtype).nbytes

    def input_bytes(p: int) -> int:
        t = c.inputs[p]
        whole = math.prod(t.shape[1:]) * dtype(t.dtype).nbytes
        readers = [(k, a[p]) for k, a in enumerate(shape.access) if p in a and a[p].kind == "rows"]
        if spans is None or not readers:
            return whole
        span = max(a.stride * (rows[k] - 1) + a.hi - a.lo + 1 for k, a in readers)
        return whole // t.shape[ROW] * min(span, t.shape[ROW])
    peak = 0
    for k, m in enumerate(members):
        live = nbytes(m, k)
        for j in range(k):
            if any(groups + j in shape.access[r] for r in range(k, len(members))):
                live += nbytes(members[j], j)
        for p in range(groups):
            if any(p in shape.access[r] and shape.access[r][p].kind != "whole" for r in range(k, len(members))):
                live += input_bytes(p)
        peak = max(peak, live)
    return peak


def plan_chain(c: Compute, target: Target) -> ChainTiling | None:
    """The split, tile rows and order of chain group `c` on `target` (None: not a chain):
    depth-first holds one tile's live bytes per core at a time, breadth-first all of
    the members' whole tensors."""
    shape = chain_shape(c)
    if shape is None:
        return None
    v = split_factor(peak_live_bytes(c, shape), l2_bytes(target))
    # at least two instances per core: the cores stay balanced, and depth-first streams
    tiles = min(v, shape.rows)
    while shape.batch * tiles < 2 * target.units and tiles < shape.rows:
        tiles *= 2
    rows = -(-shape.rows // min(tiles, shape.rows))
    # The split counts whole rows; a tile also holds its halos (each member's rows for
    # the windows after it), so tiles shrink until an interior one fits too: UNet's last
    # block at 128 x 128 (32 channels concatenated, two 3x3 convolutions to 16) needs
    # 1.18 MB a 32-row tile, which spilled a 1 MB L2 (Zen 4) and ran slower than the
    # members apart.
    def interior(rows: int) -> tuple[Span, ...]:  # the spans of a tile away from the edges
        return task_spans(shape, min(rows, shape.rows // 2), rows)[0]
    while rows > 1 and peak_live_bytes(c, shape, interior(rows)) > l2_bytes(target):
        rows = -(-rows // 2)
    spans = interior(rows)
    concurrent = min(target.units, shape.batch * -(-shape.rows // rows))
    depth = peak_live_bytes(c, shape, spans) * concurrent
    return ChainTiling(v, rows, depth < peak_live_bytes(c, shape) * min(target.units, shape.batch))


def runs_as_chain(c: Compute, target: Target, plan: ChainTiling | None = None) -> bool:
    """Whether group `c` runs as one chain kernel on `target` (its `plan_chain`, planned
    here unless given): depth-first, or whole on the calling thread where it is too small
    to repay starting threads."""
    plan = plan or plan_chain(c, target)
    return plan is not None and (plan.depth_first or runs_serially(c))


def is_chain_group(c: Compute) -> bool:
    """Whether group `c` is a convolution chain (row groups, compiler/schedule/tilegraph/
    rows.py, hold neither contractions nor padded reads, so the two never meet)."""
    return bool(c.stages) and chain_shape(c) is not None and any(
        match_contraction(m) is not None or any(ld.pad is not None for ld in loads_of(m)) for m in c.members())


def fuse_chains(graph: Graph, target: Target, log: GroupLog | None = None) -> Graph:
    """Merge convolution chains into groups (Computes with stages) that run depth-first
    on `target`, in place; returns graph. With a `log`, each group is offered to it
    (refused: its members stay apart) and recorded in it once made.

    Chains that down-sample are made first: grown from the sink backwards, the block after
    a down-sampling would otherwise take its projection, and leave the down-sampling's wide
    output to cross memory."""
    protected = {graph.storage_of(t) for t in graph.outputs}
    placed = {id(n) for n in graph.nodes if placeable(graph, n)}  # chains make no new Concat
    for down_sampling in (True, False):
        _fuse_pass(graph, target, log, protected, placed, down_sampling)
    for i, node in enumerate(graph.nodes):
        node.id = i
    return graph


def _fuse_pass(graph: Graph, target: Target, log: GroupLog | None, protected: set[int], placed: set[int],
               down_sampling: bool) -> None:
    """One pass of `fuse_chains` over the sinks, last first: it makes only the chains that
    down-sample where `down_sampling`, else any."""
    for sink in reversed(list(graph.nodes)):
        if sink not in graph.nodes or sink.compute.stages or len(sink.compute.axes) != 4:
            continue
        members = _grow(graph, sink, protected, placed, target)
        if len(members) < 2:
            continue
        node = merge_nodes(graph, members)
        if down_sampling and not ((shape := chain_shape(node.compute)) is not None and shape.down_samples):
            continue
        if not runs_as_chain(node.compute, target):
            continue
        if log is not None and not log.allows(Level.L2_TILES, members, node.compute):
            continue
        if log is not None:
            log.record(Level.L2_TILES, members, node)
        put_in_place(graph, sink, node, members[:-1])


def _one_down_sampling(shape: ChainShape, groups: int) -> bool:
    """Whether a chain that down-samples is one inverted residual at most: one down-sampling,
    one member before it (at scale 2, reading only group inputs) and one after. What the
    down-sampling keeps in cache is its producer's output (the expanded tensor); past the
    block, halos compound with the stride for narrow tensors the caches hold anyway
    (MobileNetV2's first two blocks as one chain measured 752 us, as two chains 309 + 278)."""
    if not shape.down_samples:
        return True
    return (max(shape.scales) <= MAX_ROW_STRIDE and len(shape.scales) <= _MAX_DOWN_SAMPLING_MEMBERS
            and all(scale == 1 or all(p < groups for p in access)
                    for scale, access in zip(shape.scales, shape.access, strict=True)))


def _alone_split(node: Node, target: Target) -> int:
    shape = chain_shape(node.compute, padded_inputs=True)
    return 0 if shape is None else split_factor(peak_live_bytes(node.compute, shape), l2_bytes(target))


def _grow(graph: Graph, sink: Node, protected: set[int], placed: set[int], target: Target) -> list[Node]:
    """The members of the largest chain ending at `sink`, in topological order. None of the
    `placed` concatenations (ids of their nodes) joins as a producer: placed, it costs nothing,
    and a chain would copy its parts (YOLO's neck, its Concat taken into the convolutions
    after it, ran 1-15% slower than with the parts written in place); a sink may be one."""
    order = {id(n): k for k, n in enumerate(graph.nodes)}
    producers = {n.output: n for n in graph.nodes}
    readers: dict[int, set[int]] = {}
    for n in graph.nodes:
        for t in n.inputs:
            readers.setdefault(graph.storage_of(t), set()).add(id(n))
    members = [sink]
    splits = {id(sink): _alone_split(sink, target)}
    changed = True
    while changed and len(members) < _MAX_MEMBERS:
        changed = False
        for m in list(members):
            for t in m.inputs:
                p = producers.get(t)
                if (p is None or p in members or t in protected or p.compute.stages
                        or graph.tensors[t].kind != TensorKind.INTERMEDIATE or graph.storage_of(t) != t
                        or not readers[t] <= {id(x) for x in members} or id(p) in placed):
                    continue
                trial = sorted([*members, p], key=lambda n: order[id(n)])
                merged = merge_nodes(graph, trial).compute
                shape = chain_shape(merged, padded_inputs=True)
                if shape is None or len(merged.inputs) > _MAX_INPUTS or not _one_down_sampling(shape, len(merged.inputs)):
                    continue
                splits[id(p)] = _alone_split(p, target)
                v = split_factor(peak_live_bytes(merged, shape), l2_bytes(target))
                if v <= max(splits[id(x)] for x in trial):
                    members, changed = trial, True
    return members
