"""Register-level connection of operators (Welder's cheapest edge, TVM's inlining).

Two rewrites, applied to a fixed point:

- **producer inlining**: an injective producer (no reduce axes) whose output
  is read by a single consumer is substituted into that consumer's body, so
  its values live in registers and never touch memory. Into a reduction it is
  inlined only when cheap (no transcendental work), because the reduction
  re-evaluates it once per reduce step.
- **epilogue fusion**: an injective consumer that reads a reduction's output
  at exactly its own index (bias add, activation, residual add after MatMul
  or Conv) becomes the reduction's `post` expression.

Edges connect through the same tensor, not through a reshape view (a view changes the
index map and would need div/mod arithmetic per element), with one exception: an epilogue
read through a view that only adds or drops extent-1 axes (GPT-2's Conv1D: a Gemm on
[tokens, features], viewed as [1, tokens, features] before its GELU) connects, the
contraction taking the view's shape (`_unit_reshaped`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from compiler.ir.contraction import match_contraction, plain_load
from compiler.ir.graph import Graph, Node, TensorKind
from compiler.ir.te import (
    ACC,
    Axis,
    Call,
    Compute,
    Const,
    Expr,
    Load,
    TensorType,
    Var,
    call,
    cast,
    const,
    expr_depth,
    remap_loads,
    rename_vars,
    select,
    substitute,
    walk,
)
from compiler.schedule.concat_in_place import placeable
from compiler.schedule.tilegraph.groups import GroupLog, Level

# Ops whose repeated evaluation inside a reduction loop would cost more than the memory saved.
_EXPENSIVE = {"exp", "log", "tanh", "erf", "pow", "sqrt", "div", "sin", "cos", "tan", "asin",
              "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "fmod", "mod",
              "reciprocal"}

_MAX_INPUTS = 16  # keep argument lists (and register pressure) sane
# Fused expressions stay this shallow: every pass over an expression recurses through it
# (a chain of 20,000 element-wise nodes fused whole overflowed Python's stack), and a
# kernel this deep has long stopped gaining from one more inlined operator.
MAX_EXPR_DEPTH = 96
# An element-wise producer that loads several values is not inlined into a consumer that
# reads it at this many places or more (`_recomputed`).
MIN_RECOMPUTED_READS = 4


def _is_cheap(c: Compute) -> bool:
    return not any(isinstance(x, Call) and x.op in _EXPENSIVE for x in walk(c.body))


def _plain_contraction(c: Compute) -> bool:
    """Whether `c` is a sum of products of two loads (what the packed GEMM paths compute):
    a producer inlined into one of those operands (a Concat feeding a 1x1 convolution, a
    ReLU before one) would leave the kernel to the general path, several times slower
    (an exported YOLO neck ran at 0.18x onnxruntime)."""
    m = match_contraction(c)
    return m is not None and plain_load(m.lhs) is m.lhs and plain_load(m.rhs) is m.rhs


Slots = list[tuple[int, int, TensorType]]  # (slot in its node, tensor id, type)


def _slots(node: Node, skip: int | None = None) -> Slots:
    return [(i, tid, tt) for i, (tid, tt) in enumerate(zip(node.inputs, node.compute.inputs, strict=True))
            if i != skip]


def _merge_inputs(
    first: Slots, second: Slots
) -> tuple[tuple[int, ...], tuple[TensorType, ...], dict[int, int], dict[int, int]]:
    """One input list for a fused node: `first`'s tensors, then `second`'s not already there.

    Returns (tensor ids, types, first slot -> new slot, second slot -> new slot).
    """
    ids: list[int] = []
    types: list[TensorType] = []
    maps: tuple[dict[int, int], dict[int, int]] = ({}, {})
    for m, slots in zip(maps, (first, second), strict=True):
        for slot, tid, tt in slots:
            if tid not in ids:
                ids.append(tid)
                types.append(tt)
            m[slot] = ids.index(tid)
    return tuple(ids), tuple(types), maps[0], maps[1]


def _guard_loads(e: Expr) -> Expr:
    """Give every unguarded load a pad, so evaluating `e` at out-of-range indices is safe."""

    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Load) and x.pad is None:
            return Load(x.input, tuple(substitute(i, fn) for i in x.indices), x.dtype, 0)
        return None

    return substitute(e, fn)


def _inline(consumer: Node, slot: int, producer: Node) -> tuple[Compute, tuple[int, ...]]:
    """The consumer's Compute with producer values substituted for loads of `slot`."""
    ids, types, cmap, pmap = _merge_inputs(_slots(consumer, skip=slot), _slots(producer))
    p = producer.compute
    pbody = remap_loads(p.body, pmap)

    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Load) and x.input == slot:
            idx = tuple(substitute(i, fn) for i in x.indices)
            value = rename_vars(pbody, {a.name: i for a, i in zip(p.axes, idx, strict=True)})
            if x.pad is None or not p.axes:
                return value
            # A padded read: out-of-range indices yield the pad; the producer's own
            # loads are guarded so that evaluating them out of range is harmless.
            inside: Expr = Const(True, "bool")
            for i, a in zip(idx, p.axes, strict=True):
                inside = call("and", inside, call("and", call("ge", i, 0), call("lt", i, a.extent)))
            return select(inside, _guard_loads(value), const(x.pad, x.dtype))
        if isinstance(x, Load):
            return Load(cmap[x.input], tuple(substitute(i, fn) for i in x.indices), x.dtype, x.pad)
        return None

    c = consumer.compute
    body = substitute(c.body, fn)
    post = None if c.post is None else substitute(c.post, fn)
    return replace(c, body=body, post=post, inputs=types,
                   label=f"{p.label}+{c.label}" if p.label and c.label else c.label or p.label), ids


def _depth(c: Compute, known: dict[int, tuple[Compute, int]]) -> int:
    """The deepest of `c`'s expressions (memoised in `known` for the fusion pass)."""
    if id(c) not in known:
        known[id(c)] = (c, max(expr_depth(c.body), expr_depth(c.post) if c.post is not None else 0))
    return known[id(c)][1]


def _reads_at_own_index(c: Compute, slot: int) -> bool:
    """Every load of `slot` in c's body indexes with exactly c's axes, in order
    (an extent-1 axis may be indexed by the constant 0)."""
    loads = [x for x in walk(c.body) if isinstance(x, Load) and x.input == slot]
    return bool(loads) and all(ld.pad is None and len(ld.indices) == len(c.axes) and all(
        i == Var(a.name) or (a.extent == 1 and isinstance(i, Const) and i.value == 0)
        for i, a in zip(ld.indices, c.axes, strict=True)) for ld in loads)


def _recomputed(p: Compute, c: Compute, slot: int) -> bool:
    """Whether inlining `p` into element-wise `c` would compute each of its values again at
    many places: c reads it at MIN_RECOMPUTED_READS indices or more and p reads several
    values itself. Winograd's transforms in two passes (compiler/frontend/ops/winograd.py),
    inlined into one, read every window element again at each table position: F(4x4, 3x3)'s
    input transform of 64 channels on 56 x 56 took 675 us so, 233 + 75 in two passes."""
    reads = {x for x in walk(c.body) if isinstance(x, Load) and x.input == slot}
    return len(reads) >= MIN_RECOMPUTED_READS and sum(isinstance(x, Load) for x in walk(p.body)) > 1


def _padded_reads(c: Compute, slot: int) -> bool:
    return any(isinstance(x, Load) and x.input == slot and x.pad is not None for x in walk(c.body))


def _epilogue(producer: Node, consumer: Node, slot: int,
              at: dict[str, Expr] | None = None) -> tuple[Compute, tuple[int, ...]]:
    """The reduction `producer` with the element-wise `consumer` folded into its post;
    `at`: each consumer axis as an expression of the producer's (default: the producer's
    axis in the same place)."""
    p, c = producer.compute, consumer.compute
    # the consumer's inputs except the reduction output, after the producer's own inputs
    ids, types, _, cmap = _merge_inputs(_slots(producer), _slots(consumer, skip=slot))
    rename = at if at is not None else {a.name: Var(b.name) for a, b in zip(c.axes, p.axes, strict=True)}
    acc_value = p.post if p.post is not None else cast(Var(ACC, p.acc_dtype), p.dtype)

    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Load) and x.input == slot:
            return acc_value
        if isinstance(x, Load):
            return Load(cmap[x.input], tuple(substitute(i, fn) for i in x.indices), x.dtype, x.pad)
        return None

    # rename the consumer's axes to the producer's first, then splice in the accumulator
    post = substitute(rename_vars(c.body, rename), fn)
    fused = replace(p, post=post, inputs=types, dtype=c.dtype,
                    label=f"{p.label}+{c.label}" if p.label and c.label else p.label or c.label)
    return fused, ids


def fuse(graph: Graph, log: GroupLog | None = None) -> Graph:
    """Connect injective producers and epilogues at register level, in place; returns graph.

    With a `log`, each connection is first offered to it (`GroupLog.allows`: the cost
    check) and recorded in it once made.

    Greedy, in graph order: the first node with an input whose producer connects into it
    takes it, and the scan goes on from that node (nodes before it cannot have changed:
    their producers come earlier still), so a long chain costs linear, not quadratic, time."""
    protected = {graph.storage_of(t) for t in graph.outputs}
    views: dict[int, list[int]] = {}  # tensor -> the views of its storage
    for t in graph.tensors.values():
        if t.view_of is not None:
            views.setdefault(t.view_of, []).append(t.id)
    depth: dict[int, tuple[Compute, int]] = {}  # id -> (the Compute, kept alive: ids are not reused), depth
    producers = {n.output: n for n in graph.nodes}
    readers: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for t in n.inputs:
            readers.setdefault(graph.storage_of(t), []).append(n)
    nodes: list[Node | None] = list(graph.nodes)  # a connected producer leaves a hole (None)
    position = {id(x): k for k, x in enumerate(graph.nodes)}
    i = 0
    while i < len(nodes):
        n = nodes[i]
        # a Concat whose parts are written in place by their producers takes none of them
        if n is None or placeable(graph, n):
            i += 1
            continue
        merged = None
        for slot, tid in enumerate(n.inputs):
            p, view_of = producers.get(tid), graph.tensors[tid].view_of
            if p is None and view_of is not None and views.get(view_of) == [tid]:
                p = producers.get(view_of)  # its storage's one view: an epilogue may read through it
            if p is None or p is n or tid in protected or graph.storage_of(tid) in protected:
                continue
            if graph.tensors[tid].kind != TensorKind.INTERMEDIATE:
                continue
            # One read in all: a consumer reading the value through a second slot or a
            # view would still need it after the producer is gone.
            if len(readers.get(graph.storage_of(tid), [])) != 1:
                continue
            new = _try_connect(p, n, slot, depth, through_view=view_of is not None)
            if new is None:
                continue
            compute, ids = new
            reshaped = compute.shape != graph.tensors[n.output].shape  # `_merged_axes`: its own storage
            if reshaped and (n.output in protected or graph.tensors[n.output].view_of is not None):
                continue
            if len(ids) > _MAX_INPUTS or (log is not None and not log.allows(Level.REGISTERS, (p, n), compute)):
                continue
            output = n.output
            if reshaped:  # the consumer's output becomes a view of the fused kernel's
                output = graph.new_tensor(compute.shape, compute.dtype).id
                # a new Tensor, not the old one changed: the lowered graph shares it (`lowered_copy`)
                graph.tensors[n.output] = replace(graph.tensors[n.output], view_of=output)
                views[output] = [n.output]
                readers[output] = readers.pop(n.output, [])
            merged = Node(n.id, f"{p.op}+{n.op}", compute, ids, output, n.name or p.name)
            if log is not None:
                log.record(Level.REGISTERS, (p, n), merged)
            # the fused node takes the consumer's place: all its inputs are ready there
            nodes[i], nodes[position[id(p)]] = merged, None
            position[id(merged)] = i
            dropped = {tid, graph.storage_of(tid)}  # a view read goes with its storage
            views.pop(graph.storage_of(tid), None)
            _forget(graph, producers, readers, p, n, merged, dropped)
            break
        if merged is None:
            i += 1  # else look at the fused node again, from its first input
    graph.nodes = [x for x in nodes if x is not None]
    for k, node in enumerate(graph.nodes):
        node.id = k
    return graph


def _forget(graph: Graph, producers: dict[int, Node], readers: dict[int, list[Node]],
            p: Node, n: Node, merged: Node, dropped: set[int]) -> None:
    """Drop the tensors `dropped` (the connected value, and the view it was read through)
    and keep the producer and reader maps as a rebuild would make them now that `merged`
    stands for producer `p` and consumer `n`."""
    for tid in dropped:
        producers.pop(tid, None)
        readers.pop(tid, None)
    producers[merged.output] = merged
    for t in {graph.storage_of(x) for x in (*p.inputs, *n.inputs) if x not in dropped}:
        readers[t] = [r for r in readers.get(t, []) if r is not p and r is not n]
    for tid in dropped:
        del graph.tensors[tid]
    for t in merged.inputs:
        readers.setdefault(graph.storage_of(t), []).append(merged)


def _try_connect(p: Node, n: Node, slot: int, depth: dict[int, tuple[Compute, int]],
                 through_view: bool = False) -> tuple[Compute, tuple[int, ...]] | None:
    """The fused (Compute, input ids) for edge p -> n through n's input `slot` (a view of
    p's output where `through_view`: an epilogue only), or None."""
    pc, nc = p.compute, n.compute
    if _depth(pc, depth) + _depth(nc, depth) > MAX_EXPR_DEPTH:
        return None
    if not pc.is_reduction:
        if through_view:
            return None
        # Into a reduction only cheap producers, and not through padded reads: the pad
        # would become a select around the value that hides the padding-free interior.
        if nc.is_reduction and (not _is_cheap(pc) or _padded_reads(nc, slot)):
            return None
        if pc.dtype != nc.inputs[slot].dtype:
            return None
        if not nc.is_reduction and _recomputed(pc, nc, slot):
            return None
        inlined = _inline(n, slot, p)
        if _plain_contraction(nc) and not _plain_contraction(inlined[0]):
            return None  # the GEMM paths need loads on both sides
        return inlined
    if not nc.is_reduction and _reads_at_own_index(nc, slot) and nc.post is None:
        shaped = pc if nc.shape == pc.shape else _unit_reshaped(pc, nc.shape)
        if shaped is not None:
            return _epilogue(replace(p, compute=shaped), n, slot)
        merged = _merged_axes(pc.axes, nc.axes)
        if merged is not None:  # the fused kernel keeps the producer's shape (`fuse` views it)
            return _epilogue(p, n, slot, merged)
    return None


def _merged_axes(producer: Sequence[Axis], consumer: Sequence[Axis]) -> dict[str, Expr] | None:
    """Each consumer axis as an affine expression of the producer's, where the consumer's
    shape merges runs of consecutive producer axes (a grouped convolution's [groups,
    channels of a group] read as channels: c = g * channels + j), extent-1 axes aside;
    None for any other reshape. In that direction the view's index map is affine, so an
    epilogue's other loads stay affine in the producer's index space."""
    kept = iter([a for a in producer if a.extent != 1])
    at: dict[str, Expr] = {}
    for a in consumer:
        run: list[Axis] = []
        while math.prod(x.extent for x in run) < a.extent:
            nxt = next(kept, None)
            if nxt is None:
                return None
            run.append(nxt)
        if math.prod(x.extent for x in run) != a.extent:
            return None
        value: Expr = Var(run[0].name) if run else Const(0, "int64")
        for x in run[1:]:
            value = value * x.extent + Var(x.name)
        at[a.name] = value
    return at if next(kept, None) is None else None


def _unit_reshaped(c: Compute, shape: tuple[int, ...]) -> Compute | None:
    """Contraction `c` computing the same values in `shape`, where that only adds or drops
    extent-1 axes (a dropped axis's index is 0; an added one a fresh name no expression
    reads); None for any other reshape. Its reduce axes and loads are unchanged, so the
    GEMM paths still match it."""
    if [d for d in c.shape if d != 1] != [d for d in shape if d != 1]:
        return None
    dropped = {a.name: Const(0, "int64") for a in c.axes if a.extent == 1}
    kept = iter([a for a in c.axes if a.extent != 1])
    taken = {a.name for a in (*c.axes, *c.reduce_axes)}
    axes = []
    for d in shape:
        if d != 1:
            axes.append(next(kept))
            continue
        name = next(f"u{k}" for k in range(len(taken) + 1) if f"u{k}" not in taken)
        taken.add(name)
        axes.append(Axis(name, 1))
    post = None if c.post is None else rename_vars(c.post, dropped)
    return replace(c, axes=tuple(axes), body=rename_vars(c.body, dropped), post=post)
