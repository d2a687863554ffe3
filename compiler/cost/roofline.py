"""The roofline of a compiled model: per kernel, its work, its measured time, and the bound.

A kernel's FLOPs and DRAM bytes come from the TE analyses (`TileAnalysis.flops`
and `compulsory`: every input read once, the output written once, in whole
transactions). Its roofline time is max(FLOPs / peak, bytes / bandwidth), with
the peak and bandwidth the target's *measured* ones (`tileforge targets
--measure`); a target without measurements has no bounds, and the rows say so
instead of using datasheet or derived numbers. Rows are sorted by the time lost
against the bound: measured time minus roofline time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from compiler.cost.analysis import TileAnalysis
from compiler.cost.model import group_bytes
from compiler.cost.shortfall import shortfall
from compiler.ir.te import Compute
from compiler.target.base import Target

# Below this fraction of its bound a kernel's row carries a reason, where one is known.
SHORTFALL_BELOW = 0.5


@dataclass(frozen=True)
class Bounds:
    """A target's measured fp32 peak (FLOP/s) and DRAM bandwidth (bytes/s)."""

    peak_flops: float
    bandwidth: float

    def to_dict(self) -> dict:
        return {"peak_gflops": round(self.peak_flops / 1e9, 3), "bandwidth_gbs": round(self.bandwidth / 1e9, 3)}


def measured_bounds(target: Target) -> Bounds | None:
    """The target's measured bounds, or None where its numbers were not measured (a named
    preset, or the host before `tileforge targets --measure`). A target narrowed to fewer
    threads (`Target.with_units`) has the peak scaled to them; DRAM stays shared."""
    if not target.extras.get("measured"):
        return None
    return Bounds(target.peak_flops["float32"], target.levels[0].bandwidth)


def no_bounds_note(target: Target) -> str:
    """What a table without bounds says about them."""
    return (f"target {target.name} has no measured peak FLOP/s or bandwidth: run `tileforge targets "
            f"--measure` on the machine it runs on (named targets are never measured)")


@dataclass(frozen=True)
class KernelTime:
    """One launched kernel and its measured time (what a roofline row is made of)."""

    id: int
    symbol: str
    compute: Compute
    block: tuple[int, ...]  # the plan's outputs per task, per spatial axis
    measured_us: float
    ops: tuple[str, ...] = ()
    gemms: tuple[tuple[int, int, int], ...] = ()  # (M, N, K) of the GEMMs its tasks run (CPU)
    # (multiply-adds run, bytes of input copied per call) of its GEMM (cpu_gemm.gemm_work),
    # asked only for a row that falls short (reading it from the plan costs 60 ms on ResNet-18)
    gemm_work: Callable[[], tuple[int, int] | None] = lambda: None
    chain_rows: int | None = None  # a convolution chain's rows per tile (its ChainTiling)
    work: tuple[int, int] | None = None  # `kernel_work`'s answer where known already


@dataclass(frozen=True)
class RooflineRow:
    """One kernel against its bound; the bound fields are None without measured bounds.
    `share` is the fraction of the model's time (None when the model was not timed)."""

    id: int
    symbol: str
    op_pattern: str
    ops: tuple[str, ...]
    flops: int
    dram_bytes: int
    measured_us: float
    gflops: float
    gbs: float
    bound: str | None  # "compute" or "memory": the larger of the two roofline times
    bound_us: float | None
    pct_of_bound: float | None
    lost_us: float | None
    share: float | None
    reason: str

    def to_dict(self) -> dict:
        return {**asdict(self), "ops": list(self.ops)}


def kernel_work(compute: Compute, target: Target) -> tuple[int, int]:
    """(FLOPs, compulsory DRAM bytes) of `compute` on `target`, from the TE analyses: the
    FLOPs of the points that read no padding (`useful_flops`); a fused row group's bytes
    as the cost model counts them (its stages meet in cache)."""
    an = TileAnalysis(compute)
    if compute.stages:
        return an.flops(), group_bytes(compute)
    return an.useful_flops(), an.compulsory(target.levels[0].transaction)


def roofline_row(k: KernelTime, target: Target, bounds: Bounds | None,
                 model_us: float | None = None) -> RooflineRow:
    """`k` against `bounds` on `target`: achieved rates, the closer bound, the time lost."""
    flops, nbytes = k.work or kernel_work(k.compute, target)
    seconds = max(k.measured_us, 1e-3) * 1e-6  # a timer's 0 would divide by zero
    bound = bound_us = pct = lost = None
    reason = ""
    if bounds is not None:
        compute_us, memory_us = flops / bounds.peak_flops * 1e6, nbytes / bounds.bandwidth * 1e6
        bound, bound_us = ("compute", compute_us) if compute_us >= memory_us else ("memory", memory_us)
        pct = 100.0 * bound_us / (seconds * 1e6)
        lost = k.measured_us - bound_us
        if pct < 100 * SHORTFALL_BELOW:
            reason = shortfall(k.compute, k.block, target, gemms=k.gemms, bounds_us=(compute_us, memory_us),
                               gemm_work=k.gemm_work(), chain_rows=k.chain_rows)
    return RooflineRow(
        id=k.id, symbol=k.symbol, op_pattern=k.compute.label, ops=tuple(k.ops), flops=flops,
        dram_bytes=nbytes, measured_us=round(k.measured_us, 3), gflops=round(flops / seconds / 1e9, 3),
        gbs=round(nbytes / seconds / 1e9, 3), bound=bound,
        bound_us=None if bound_us is None else round(bound_us, 3),
        pct_of_bound=None if pct is None else round(pct, 1),
        lost_us=None if lost is None else round(lost, 3),
        share=None if model_us is None else round(k.measured_us / model_us, 4), reason=reason)


def roofline_report(kernels: Sequence[KernelTime], target: Target, model_us: float | None = None) -> dict:
    """The roofline as JSON: the bounds (or a note saying why there are none), the model's
    time when it was taken, and the rows, the most time lost against the bound first
    (without measured bounds: the slowest first)."""
    bounds = measured_bounds(target)
    rows = sorted((roofline_row(k, target, bounds, model_us) for k in kernels),
                  key=lambda r: -(r.lost_us if r.lost_us is not None else r.measured_us))
    return {"bounds": None if bounds is None else bounds.to_dict(),
            "note": "" if bounds is not None else no_bounds_note(target),
            "model_us": None if model_us is None else round(model_us, 3),
            "rows": [r.to_dict() for r in rows]}
