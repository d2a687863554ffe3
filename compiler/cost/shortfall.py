"""Why a kernel falls short of its roofline bound, where the plan itself says so.

Only facts of the plan and the TE analyses are reported, never a guess about the
generated code: too few tasks to give every thread work, tiles that together read
several times the bytes the kernel must move at least, and operations per output that
the FLOP count takes as one each although none is a multiply-add (an exp, a divide: a
SiLU epilogue is sigmoid's exp and divide per output, beside only 16 multiply-adds in
EfficientNet-B0's 16 -> 96 expansion), GEMMs too small or too shallow to amortize what
each one costs besides its multiply-adds (packing or copying its operands, loading and
storing its accumulators: RegNetY-400MF's groups of 8 channels at 7 x 7 run GEMMs of
8 x 224 outputs, 72 deep, at 11% of the bound), and a bound whose bytes and FLOPs take about as
long as each other (near the roofline's ridge a kernel that streams its operands while
it computes on them reaches the larger only where the two overlap: MobileNetV2's
32 -> 16 projection at 112 x 112 moves 94 us of bytes beside 110 us of FLOPs, and took 220).
Work the FLOP count leaves out is named too: multiply-adds a GEMM runs on padding or on
positions past a row's end (its panels of patches read in place keep a tap wherever one
of their positions needs it: the ASPP segmenter's rate-12 convolution on 32 x 32), and
the padded copy of an input read in place made at every call (the segmenter's stride-2
convolution copies 2 MiB of its 3 MiB of compulsory bytes per call). A convolution chain
(compiler/ir/chain.py) names the rows its tasks recompute (each tile's members compute
the halos their readers' windows need, which the neighbouring tile computes too) and its
members that reduce too shallow a depth to keep FMAs busy (MobileNetV2's chains: a 1x1
expansion 16 deep and a depthwise 3x3, 9 taps, at 45-48% of the bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from compiler.cost.analysis import TileAnalysis
from compiler.ir.chain import chain_shape, task_kinds
from compiler.ir.te import Call, Compute, Expr, walk
from compiler.target.base import Target

# Tiles that move this many times the compulsory bytes re-read their inputs enough to matter.
REREAD_RATIO = 2.0
# A GEMM of fewer multiply-adds than this, or reducing fewer than SHALLOW_K deep, is small.
SMALL_GEMM = 1 << 20
SHALLOW_K = 32
# Bounds within this ratio of each other are near the ridge.
RIDGE = 0.5
# Work beyond what the roofline counts is named from this much more: multiply-adds a GEMM
# runs over the counted ones; bytes copied per call over the compulsory ones.
EXTRA_WORK = 1.25
EXTRA_COPY = 0.5
# Operations that no FMA computes, each counted as one FLOP (compiler/ir/te.py `count_ops`).
NOT_MULTIPLY_ADDS = frozenset({"div", "reciprocal", "pow", "exp", "log", "sqrt", "tanh", "erf", "sin", "cos",
                               "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"})


def shortfall(compute: Compute, block: tuple[int, ...], target: Target,
              gemms: Sequence[tuple[int, int, int]] = (), bounds_us: tuple[float, float] | None = None,
              gemm_work: tuple[int, int] | None = None, chain_rows: int | None = None) -> str:
    """A short reason `compute`, tiled in tasks of `block` outputs, misses its roofline bound
    on `target`, or "" where the plan gives none. `gemms`: the (M, N, K) of the GEMMs its
    tasks run; `bounds_us`: its FLOPs' and its bytes' roofline times; `gemm_work`: the
    multiply-adds its GEMM runs and the bytes it copies per call (schedule/cpu_gemm.py
    `gemm_work`); `chain_rows`: a convolution chain's rows per tile (its `ChainTiling`).
    Reasons are joined by "; ".

    Operations that are no multiply-adds are named whichever bound is the larger: counted
    as one FLOP each, an exp or an erf is a dozen vector instructions, enough to keep a
    kernel whose bytes set the bound off it (SegFormer's GELU over a transposed read, 32%
    of its bytes' bound)."""
    reasons = [] if compute.stages or len(block) != len(compute.axes) else _plan_reasons(compute, block, target)
    reasons += _small_gemms(gemms)
    reasons += _extra_work(compute, target, gemm_work)
    reasons += _chain_work(compute, chain_rows)
    if bounds_us is not None and min(bounds_us) >= RIDGE * max(bounds_us) > 0:
        flops_us, bytes_us = bounds_us
        reasons.append(f"near the ridge: {bytes_us:.0f} us of bytes beside {flops_us:.0f} us of FLOPs")
    slow = list(dict.fromkeys(op for c in (*compute.stages, compute) for op in _not_multiply_adds(c)))
    if slow:
        # a group's members each reduce their own extent: only a lone contraction's is named
        beside = math.prod(a.extent for a in compute.reduce_axes) if compute.is_reduction and not compute.stages else 0
        reasons.append(f"{', '.join(slow)} per output, each counted as one FLOP"
                       + (f", beside {beside} multiply-add{'s' * (beside != 1)}" if beside else ""))
    return "; ".join(reasons)


def _plan_reasons(compute: Compute, block: tuple[int, ...], target: Target) -> list[str]:
    """Idle cores and re-read inputs of a lone Compute's tiling (a row group's tasks and
    traffic follow its rows, not its tiling: none are said of it)."""
    an = TileAnalysis(compute)
    reasons = []
    tasks = an.tiles(block)
    if tasks < target.units:
        units = "cores" if target.kind == "cpu" else "SMs"
        reasons.append(f"{tasks} task{'s' * (tasks != 1)} for {target.units} {units}")
    transaction = target.levels[0].transaction
    ratio = an.traffic(block, transaction).total / max(an.compulsory(transaction), 1)
    if ratio >= REREAD_RATIO:
        reasons.append(f"its tiles read {ratio:.1f}x the compulsory bytes")
    return reasons


def _small_gemms(gemms: Sequence[tuple[int, int, int]]) -> list[str]:
    """The kernel's GEMMs that are small (under SMALL_GEMM multiply-adds) or shallow (K under
    SHALLOW_K), each shape named once."""
    small = dict.fromkeys(g for g in gemms if math.prod(g) < SMALL_GEMM or g[2] < SHALLOW_K)
    return [f"GEMM{'s' * (len(small) > 1)} of {', '.join(f'{m} x {n}, {k} deep' for m, n, k in small)}"] \
        if small else []


def _not_multiply_adds(compute: Compute) -> list[str]:
    """The ops per output element, outside the reduction, that are not multiply-adds
    (`NOT_MULTIPLY_ADDS`), in the order met."""
    per_output: Expr | None = compute.post if compute.is_reduction else compute.body
    if per_output is None:
        return []
    return [x.op for x in walk(per_output) if isinstance(x, Call) and x.op in NOT_MULTIPLY_ADDS]


def _extra_work(compute: Compute, target: Target, gemm_work: tuple[int, int] | None) -> list[str]:
    """Work the roofline does not count that the plan does: a GEMM's multiply-adds beyond
    the counted ones (taps on padding, positions past row ends) and its padded input
    copied per call."""
    reasons: list[str] = []
    if gemm_work is not None:
        an = TileAnalysis(compute)
        macs, copied = gemm_work
        counted = an.useful_flops() / 2  # a multiply-add counts 2 (an epilogue's few ops: less here)
        if counted > 0 and macs >= EXTRA_WORK * counted:
            reasons.append(f"its GEMM runs {macs / counted:.1f}x the multiply-adds counted "
                           "(taps on padding, positions past row ends)")
        compulsory = an.compulsory(target.levels[0].transaction)
        if compulsory > 0 and copied >= EXTRA_COPY * compulsory:
            reasons.append(f"copies {copied / 2**20:.1f} MiB of padded input per call "
                           f"({copied / compulsory:.1f}x the compulsory bytes)")
    return reasons


def _chain_work(compute: Compute, rows: int | None) -> list[str]:
    """A convolution chain's halo rows, computed by two tiles each, where they add
    `EXTRA_WORK` of the FLOPs counted; and its members reducing under SHALLOW_K deep."""
    if rows is None or not compute.stages:
        return []
    shape = chain_shape(compute)
    if shape is None:
        return []
    kinds, table = task_kinds(shape, rows)
    run = counted = 0.0
    shallow = []
    for k, m in enumerate(compute.members()):
        flops = TileAnalysis(m).flops()
        run += flops * sum(kinds[v].spans[k].count for v in table) / shape.member_rows[k]
        counted += flops
        depth = math.prod(a.extent for a in m.reduce_axes)
        if m.is_reduction and depth < SHALLOW_K:
            shallow.append(depth)
    reasons = []
    if counted > 0 and run >= EXTRA_WORK * counted:
        reasons.append(f"its tiles compute {run / counted:.2f}x the FLOPs counted (halo rows computed twice)")
    if shallow:
        reasons.append(f"member{'s' * (len(shallow) > 1)} {', '.join(map(str, shallow))} deep: few multiply-adds "
                       "an output against its loads and store")
    return reasons
