"""profile_model(): compile a model, time it and each of its kernels, and set them against
the target's roofline (`tileforge profile`).

The compile is an ordinary one (kernel cache, validation against onnxruntime); the
model is then timed as a whole on seeded inputs, and every kernel by the backend's
timer, inside the model's runs (CPU: the entry point's clock stamps after each kernel
and each wave's barrier; CUDA: events around each launch of a run).
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from compiler.backends import backend_for
from compiler.bench.memory import resident_bytes
from compiler.cache import KernelCache
from compiler.cost.roofline import roofline_report
from compiler.errors import TargetError
from compiler.options import CompileOptions
from compiler.pipeline import CompileResult, compile_model, kernel_times, model_bytes
from compiler.runtime import load
from compiler.runtime.interleaved import time_interleaved
from compiler.runtime.validate import random_inputs
from compiler.schedule.plan import ExecutionPlan
from compiler.target.base import Target

# The model's time: its median over at least this many runs and this long.
MODEL_RUNS, MODEL_SECONDS = 10, 0.5
# Each kernel's time: the median of its medians over this many rounds through all kernels,
# so that a burst of load from another process spoils one round, not the row.
KERNEL_ROUNDS = 3


@dataclass
class Profile:
    """A compiled model's time and its roofline (`roofline_report`'s dict, with the model
    time set); `kernels_us` sums every launch's measured time."""

    target: str
    threads: int | None
    model_us: float
    kernels_us: float
    roofline: dict
    compile: CompileResult

    @property
    def kernel_share(self) -> float:
        """The kernels' time as a fraction of the model's (time outside kernels, or kernels
        that overlap or run faster alone, move it away from 1)."""
        return self.kernels_us / self.model_us

    def to_dict(self) -> dict:
        v = self.compile.validation
        return {"target": self.target, "threads": self.threads, "model_us": round(self.model_us, 3),
                "kernels_us": round(self.kernels_us, 3), "kernel_share": round(self.kernel_share, 4),
                "cache_hits": self.compile.cache_hits, "cache_misses": self.compile.cache_misses,
                "rel_l2_error": v.get("rel_l2_error"), "validated": v.get("passed"), **self.roofline}


def profile_model(model: bytes | str | Path | onnx.ModelProto, target: str | Target = "cpu",
                  options: CompileOptions | dict | None = None,
                  cache: KernelCache | None = None) -> Profile:
    """Compile `model` (validated), then time the model and each kernel on this machine."""
    data = model_bytes(model)
    opts = options if isinstance(options, CompileOptions) else CompileOptions.from_dict(options)
    result = compile_model(data, target, opts, cache=cache)
    try:
        assert result.plan is not None and result.target is not None
        require_runnable(result.target)
        exe = load(result.artifact_path, threads=opts.threads)
        feeds = random_inputs(exe.input_specs, onnx.load_from_string(data), opts.seed)
        runs = time_interleaved([lambda: exe.run(feeds)], min_runs=MODEL_RUNS, min_seconds=MODEL_SECONDS)[0]
        model_us = statistics.median(runs) * 1e6
        kernels_us, roofline = kernel_roofline(result.plan, result.target, result.artifact_path, feeds, opts,
                                               model_us)
    finally:
        shutil.rmtree(result.artifact_path.parent, ignore_errors=True)  # compile_model's own folder
    return Profile(result.target.name, opts.threads, model_us, kernels_us, roofline, result)


def require_runnable(target: Target) -> None:
    """TargetError naming why this machine cannot run `target`'s code, if it cannot."""
    why = backend_for(target).unrunnable(target)
    if why is not None:
        raise TargetError(f"cannot profile target {target.name} on this machine: {why}")


def kernel_roofline(plan: ExecutionPlan, target: Target, artifact: Path, feeds: Mapping[str, np.ndarray],
                    opts: CompileOptions, model_us: float) -> tuple[float, dict]:
    """Each kernel of `artifact` (built from `plan`) timed by its backend, the median of
    KERNEL_ROUNDS rounds, against the target's roofline; returns (the kernels' summed time
    in us, `roofline_report`'s dict)."""
    backend = backend_for(target)
    rounds = [backend.time_plan(plan, artifact, feeds, opts, target) for _ in range(KERNEL_ROUNDS)]
    measured = {sym: statistics.median(r[sym] for r in rounds) for sym in rounds[0]}
    kernels = kernel_times(plan, measured)
    return sum(k.measured_us for k in kernels), roofline_report(kernels, target, model_us)


def profile_artifact(artifact: Path, plan: ExecutionPlan, target: Target, model: bytes, runs: int,
                     threads: int | None = None, seed: int = 0) -> dict:
    """Time a built artifact whose plan is `plan` (so that its kernels' symbols name the
    library's functions): its first load, `runs` runs of the whole model on seeded inputs
    after one warm-up (median and p90), how far this process's resident memory grew from
    before the load to its highest sample (taken after the load and after each run; a
    GPU's own memory is not in it), and each kernel against the roofline."""
    require_runnable(target)
    before = resident_bytes()
    start = time.perf_counter()
    exe = load(artifact, threads=threads)
    first_load = time.perf_counter() - start
    peak = resident_bytes()
    feeds = random_inputs(exe.input_specs, onnx.load_from_string(model), seed)
    exe.run(feeds)  # the warm-up: first touches of the arena and the weights
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        exe.run(feeds)
        times.append(time.perf_counter() - start)
        peak = max(peak, resident_bytes())
    median_us = statistics.median(times) * 1e6
    opts = CompileOptions.from_dict({"threads": threads} if threads else {})
    kernels_us, roofline = kernel_roofline(plan, target, artifact, feeds, opts, median_us)
    return {"target": target.name, "threads": threads, "runs": runs, "first_load_ms": round(first_load * 1e3, 3),
            "median_us": round(median_us, 3), "p90_us": round(float(np.percentile(times, 90)) * 1e6, 3),
            "peak_memory_bytes": max(0, peak - before), "kernels_us": round(kernels_us, 3), **roofline}


COLUMNS = ("#", "kernel", "time us", "model %", "MFLOP", "MB", "GFLOP/s", "GB/s", "bound", "% bound",
           "lost us", "reason")
_WIDTHS = (4, 28, 10, 8, 10, 9, 9, 8, 8, 8, 10, 0)


def format_profile(p: dict, top: int | None = None) -> str:
    """`Profile.to_dict()` as the text `tileforge profile` prints: bounds, model total,
    then one row per kernel (the first `top` only, when given)."""
    bounds = p["bounds"]
    lines = [f"target     {p['target']}" + (f", {p['threads']} threads" if p["threads"] else ""),
             "bounds     " + (f"{bounds['peak_gflops']:.1f} GFLOP/s, {bounds['bandwidth_gbs']:.1f} GB/s DRAM "
                             f"(measured)" if bounds else p["note"]),
             f"model      {p['model_us']:.1f} us median; kernels {p['kernels_us']:.1f} us "
             f"({100 * p['kernel_share']:.0f}% of the model)",
             "", _line(COLUMNS)]
    rows = p["rows"] if top is None else p["rows"][:top]
    for r in rows:
        lines.append(_line((
            str(r["id"]), r["op_pattern"][:_WIDTHS[1]], f"{r['measured_us']:.1f}", _pct(r["share"]),
            f"{r['flops'] / 1e6:.3f}", f"{r['dram_bytes'] / 1e6:.3f}", f"{r['gflops']:.2f}", f"{r['gbs']:.2f}",
            r["bound"] or "-", "-" if r["pct_of_bound"] is None else f"{r['pct_of_bound']:.1f}",
            "-" if r["lost_us"] is None else f"{r['lost_us']:.1f}", r["reason"])))
    if top is not None and len(p["rows"]) > top:
        lines.append(f"... {len(p['rows']) - top} more kernels (--top 0 lists all)")
    return "\n".join(lines)


def _pct(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.1f}"


def _line(cells: tuple[str, ...]) -> str:
    left = {1, 11}  # the kernel's name and the reason read left to right
    return " ".join(c.ljust(w) if i in left else c.rjust(w)
                    for i, (c, w) in enumerate(zip(cells, _WIDTHS, strict=True))).rstrip()
