"""Split-K: a contraction with too few outputs to fill a GPU has its reduction cut into
slices that run side by side, as a leading batch axis of partial sums, and a second kernel
adds the slices up (the contraction's epilogue, fused onto that sum, runs there).

A GEMM thread block walks its whole reduction serially, one shared-memory stage after the
next, and a block alone on its SM has nothing to hide each stage's load latency behind.
ResNet-18's 512-channel 3x3 convolutions at 7x7 (25,088 outputs, K = 4,608) planned as 64
blocks for the H200's 132 SMs: 223 us each for 0.23 GFLOP, about 1 TFLOP/s. Cut in 8, the
same work is 512 blocks that each walk 576 steps.

The split is applied to the lowered graph, before fusion, so the sum is an ordinary
reduction node: register-level fusion gives it the epilogue (bias, residual, activation)
and the group log weighs that group like any other. Only contractions with a weight
operand are split (convolutions and linear layers at small spatial size or batch): a
product of two activations is left whole for the attention fusion that reads it.

The rule (`split_factor`) is what a compile without the GPU plans. One that has it times
each split against the contraction joined back with the same epilogue (`join_compute`,
`time_splits`) and plans the faster, as fused groups are timed against their parts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from compiler.ir.contraction import match_contraction, plain_load
from compiler.ir.dtypes import INDEX
from compiler.ir.graph import Graph, Node, TensorKind
from compiler.ir.te import (
    Axis,
    Compute,
    Const,
    Expr,
    Load,
    TensorType,
    Var,
    remap_loads,
    rename_vars,
    walk,
)
from compiler.schedule.measure import TimeFn, Timing
from compiler.schedule.plan import Kernel

# Outputs that keep one SM busy: four resident blocks of 128 threads, four outputs a thread.
OUTPUTS_PER_UNIT = 2048
# Multiply-adds per output in a slice, at least: each slice's partial sum is written once
# and read once more (8 bytes an output), small beside the work that made it.
MIN_SLICE_K = 256
MAX_SPLIT = 32
SPLIT_LABEL = "SplitKSum"


def split_factor(c: Compute, units: int) -> int:
    """Slices for `c`'s first reduce axis on a device of `units` SMs: the largest power of
    two `s` with s x outputs <= units x OUTPUTS_PER_UNIT that divides the axis and leaves
    each slice MIN_SLICE_K multiply-adds per output; 1 where `c` is no contraction."""
    if c.stages or match_contraction(c) is None:
        return 1
    outputs = math.prod(c.shape)
    k = math.prod(a.extent for a in c.reduce_axes)
    first = c.reduce_axes[0].extent
    s = 1
    while (2 * s <= MAX_SPLIT and 2 * s * outputs <= units * OUTPUTS_PER_UNIT
           and first % (2 * s) == 0 and k // (2 * s) >= MIN_SLICE_K):
        s *= 2
    return s


def _fresh_name(c: Compute, stem: str) -> str:
    taken = {a.name for a in c.all_axes()}
    name, n = stem, 0
    while name in taken:
        n += 1
        name = f"{stem}{n}"
    return name


class Cut(NamedTuple):
    """A contraction cut in two: `partial` reads the contraction's inputs at `partial_reads`;
    `total` reads the partial sums, then the inputs at `total_reads` (its epilogue's)."""

    partial: Compute
    total: Compute
    partial_reads: tuple[int, ...]
    total_reads: tuple[int, ...]


def _reads(e: Expr | None) -> tuple[int, ...]:
    return () if e is None else tuple(sorted({x.input for x in walk(e) if isinstance(x, Load)}))


def split_compute(c: Compute, slices: int) -> Cut:
    """`c` as two Computes: the partial sums, [slices, *c.shape] of the accumulator dtype,
    reading what `c`'s reduction reads; and their sum with `c`'s epilogue, reading the
    partial sums and then what the epilogue reads."""
    first = c.reduce_axes[0]
    if first.extent % slices:
        raise ValueError(f"{slices} slices do not divide a reduce axis of {first.extent}")
    part = _fresh_name(c, "ks")
    step = first.extent // slices
    partial_reads, total_reads = _reads(c.body), _reads(c.post)
    body = rename_vars(remap_loads(c.body, {p: k for k, p in enumerate(partial_reads)}),
                       {first.name: Var(part) * step + Var(first.name)})
    partial = Compute(axes=(Axis(part, slices), *c.axes), body=body, inputs=tuple(c.inputs[p] for p in partial_reads),
                      dtype=c.acc_dtype, reduce_axes=(Axis(first.name, step), *c.reduce_axes[1:]), reduce_op="sum",
                      label=c.label)
    total = Compute(
        axes=c.axes,
        body=Load(0, (Var(part), *(Var(a.name) for a in c.axes)), c.acc_dtype),
        inputs=(TensorType(partial.shape, partial.dtype), *(c.inputs[p] for p in total_reads)),
        dtype=c.dtype, reduce_axes=(Axis(part, slices),), reduce_op="sum",
        post=None if c.post is None else remap_loads(c.post, {p: 1 + k for k, p in enumerate(total_reads)}),
        label=SPLIT_LABEL)
    return Cut(partial, total, partial_reads, total_reads)


def join_compute(partial: Compute, total: Compute) -> Compute | None:
    """The contraction `split_compute` cut, with the epilogue its sum has gathered since
    (`total`, the sum of `partial`'s slices, possibly fused with what read it), reading
    `partial`'s inputs and then `total`'s after the partial sums; None where `total` is no
    longer a plain sum of the slices."""
    part = partial.axes[0]
    plain = Load(0, (Var(part.name), *(Var(a.name) for a in total.axes)), partial.dtype)
    if total.stages or total.body != plain or total.reduce_axes != (part,) or total.reduce_op != "sum":
        return None
    first = partial.reduce_axes[0]
    body = rename_vars(partial.body, {part.name: Const(0, INDEX)})
    slot = {p: len(partial.inputs) + p - 1 for p in range(1, len(total.inputs))}
    return Compute(axes=total.axes, body=body, inputs=(*partial.inputs, *total.inputs[1:]), dtype=total.dtype,
                   reduce_axes=(Axis(first.name, first.extent * part.extent), *partial.reduce_axes[1:]),
                   reduce_op="sum", post=None if total.post is None else remap_loads(total.post, slot),
                   label="+".join(x for x in (partial.label, *total.label.split("+")[1:]) if x))


def _has_weight_operand(graph: Graph, node: Node) -> bool:
    contraction = match_contraction(node.compute)
    assert contraction is not None
    operands = (plain_load(contraction.lhs), plain_load(contraction.rhs))
    return any(ld is not None and graph.tensors[graph.storage_of(node.inputs[ld.input])].kind == TensorKind.WEIGHT
               for ld in operands)


def split_contractions(graph: Graph, units: int, whole: Collection[int] = ()) -> dict[int, int]:
    """Split, in place, every contraction of `graph` with a weight operand whose outputs
    leave a device of `units` SMs idle (`split_factor`), except the nodes in `whole` (a
    split timed slower than the contraction); returns the partial sums' tensors and the id
    of the node each was cut from (tensors keep their ids through fusion, nodes do not).
    The partial sums run as a new node just before the sum, which keeps the node's id,
    output and name."""
    next_id = max((n.id for n in graph.nodes), default=-1) + 1
    nodes: list[Node] = []
    split: dict[int, int] = {}
    for node in graph.nodes:
        slices = split_factor(node.compute, units)
        if slices == 1 or node.id in whole or not _has_weight_operand(graph, node):
            nodes.append(node)
            continue
        cut = split_compute(node.compute, slices)
        out = graph.new_tensor(cut.partial.shape, cut.partial.dtype)
        nodes.append(Node(next_id, node.op, cut.partial, tuple(node.inputs[p] for p in cut.partial_reads),
                          out.id, node.name))
        nodes.append(Node(node.id, SPLIT_LABEL, cut.total, (out.id, *(node.inputs[p] for p in cut.total_reads)),
                          node.output, node.name))
        split[out.id] = node.id
        next_id += 1
    graph.nodes = nodes
    return split


@dataclass
class SplitVerdict:
    """What timing said of one split contraction (`ops`: it and its epilogue): the partial
    sums and their sum against the contraction whole, in microseconds; `kept` is "split" or
    "whole", `by` "timed" or "cache" (an earlier compile's plan, kept untimed)."""

    node: int
    ops: tuple[str, ...]
    slices: int
    split_us: float | None
    whole_us: float | None
    kept: str
    by: str

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "ops": list(self.ops)}


WholeKernel = Callable[[int, Compute, tuple[int, ...], tuple[str, ...]], Kernel]


def time_splits(kernels: Sequence[Kernel], splits: Mapping[int, int], whole_kernel: WholeKernel,
                time: TimeFn, cached: Callable[[str], bool]) -> list[SplitVerdict]:
    """Time each split contraction of a plan (`splits`: partial-sum tensor -> the id of
    the node it was cut from) against the contraction whole: the partial sums' kernel and the kernel
    summing them (with whatever epilogue fusion gave it) against `whole_kernel`'s, the
    joined Compute at its best tile, in one request to `time`. A split whose kernels the
    cache holds stands, and a contraction whose whole kernel it holds stays whole, untimed
    (an earlier compile's verdict, so that a second compile plans the same)."""
    by_output = {k.args[0]: k for k in kernels}
    readers: dict[int, list[Kernel]] = {}
    for k in kernels:
        for storage in k.args[1:]:
            readers.setdefault(storage, []).append(k)
    verdicts, pairs, todo = [], [], {}
    for partial_sums, original in splits.items():
        part = by_output.get(partial_sums)
        total = readers.get(part.args[0], []) if part is not None else []
        joined = join_compute(part.compute, total[0].compute) if part is not None and len(total) == 1 else None
        if part is None or joined is None:
            continue
        total_kernel, slices = total[0], part.compute.axes[0].extent
        ops = (*part.ops, *total_kernel.ops[1:])
        if cached(part.key) and cached(total_kernel.key):  # checked first: the whole kernel is not timed
            verdicts.append(SplitVerdict(original, ops, slices, None, None, "split", "cache"))
            continue
        consts = (*part.constant_inputs,
                  *(len(part.compute.inputs) + i - 1 for i in total_kernel.constant_inputs if i >= 1))
        whole = whole_kernel(original, joined, consts, ops)
        if cached(whole.key):
            verdicts.append(SplitVerdict(original, ops, slices, None, None, "whole", "cache"))
            continue
        pairs.append((original, ops, slices, part, total_kernel, whole))
        for k in (part, total_kernel, whole):
            todo.setdefault(k.key, k)
    measured = time([Timing(key, k, [k.tile]) for key, k in todo.items()]) if todo else {}
    for original, ops, slices, part, total_kernel, whole in pairs:
        if all(k.key in measured for k in (part, total_kernel, whole)):
            split_us = measured[part.key][0] + measured[total_kernel.key][0]
            whole_us = measured[whole.key][0]
            verdicts.append(SplitVerdict(original, ops, slices, round(split_us, 3), round(whole_us, 3),
                                         "whole" if whole_us < split_us else "split", "timed"))
    return verdicts
