"""Latency of a compiled model against onnxruntime, in one process, same thread count."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import onnx
import onnxruntime as ort

from compiler.cache import KernelCache
from compiler.options import CompileOptions
from compiler.target.base import Target


def time_interleaved(fns: Sequence[Callable[[], object]], min_runs: int = 20, min_seconds: float = 1.0,
                     phase_seconds: float = 0.1, settle_seconds: float = 0.01, warmup: int = 2,
                     max_runs: int = 5000) -> list[list[float]]:
    """Wall-clock seconds of repeated calls of each of `fns` (after warm-up), taken in
    alternating phases of about `phase_seconds` so that a change in the machine's load
    (another process, a frequency step) lands on all of them alike: at least
    `min_runs` calls each and `min_seconds` in all. Before each phase the process
    waits until it is idle (`wait_until_idle`, windows of `settle_seconds`): a runtime's
    pool threads spin after its last call, and would take the cores from the next
    phase's."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    while len(times[0]) < max_runs and (len(times[0]) < min_runs or time.perf_counter() - start < min_seconds):
        for fn, out in zip(fns, times, strict=True):
            wait_until_idle(settle_seconds)
            phase_end = time.perf_counter() + phase_seconds
            while True:
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
                if t0 >= phase_end:
                    break
    return times


def wait_until_idle(window: float, at_most: float = 1.0) -> float:
    """Sleep until no thread of this process used the CPU for a whole `window` (seconds),
    or `at_most` seconds passed; returns the seconds waited. onnxruntime's pool threads
    spin 50-60 ms after each run, libgomp's about 10-20 ms: on 2 cores, a 2-thread run
    started in that time shares a core with the spinning thread. It took the first 4-5
    calls of each of our phases after onnxruntime's twice as long (dilated segmenter, a
    fixed 20 ms pause: 7.4 against 3.3 ms; per-call medians of a 6 s series 5.4 against
    3.4 ms alone)."""
    start = time.perf_counter()
    while window > 0:
        cpu = time.process_time()
        time.sleep(window)
        waited = time.perf_counter() - start
        # under 10% of one core over the window: the sleeping thread's own wake-up, nothing spinning
        if time.process_time() - cpu < 0.1 * window or waited >= at_most:
            return waited
    return 0.0


@dataclass
class BenchResult:
    """Medians in milliseconds; ratio > 1 means tileforge is faster than onnxruntime."""

    model: str
    threads: int
    compile_seconds: float
    kernels: int
    cache_hits: int
    rel_l2_error: float
    tileforge_ms: float
    onnxruntime_ms: float
    # report.json's per-kernel entries (symbol, ops, measured_us, ...): where the time went
    kernel_times: list[dict] = field(default_factory=list, repr=False)

    @property
    def speedup(self) -> float:
        return self.onnxruntime_ms / self.tileforge_ms

    def to_dict(self) -> dict:
        d = asdict(self)
        del d["kernel_times"]
        return {**d, "speedup_vs_onnxruntime": round(self.speedup, 3)}


def ort_session(model: bytes, threads: int) -> ort.InferenceSession:
    """An onnxruntime CPU session limited to `threads` threads (the reference everywhere)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def compare_latency(artifact: Path, model: bytes, threads: int, seed: int = 0) -> tuple[float, float]:
    """Median seconds per run of (the artifact, onnxruntime) on the same random inputs."""
    from compiler.runtime import load
    from compiler.runtime.validate import random_inputs

    exe = load(artifact)
    exe.set_threads(threads)
    # the validation's inputs: integer ones (token ids, indices) stay in range
    feeds = random_inputs(exe.input_specs, onnx.load_from_string(model), seed)
    sess = ort_session(model, threads)
    ours, ref = time_interleaved([lambda: exe.run(feeds), lambda: sess.run(None, feeds)])
    return statistics.median(ours), statistics.median(ref)


def bench_model(model: bytes | str | Path | onnx.ModelProto, name: str = "model", target: str | Target = "cpu",
                threads: int = 1, options: dict | None = None,
                cache: KernelCache | None = None) -> BenchResult:
    """Compile (validated against onnxruntime), then time both runtimes on the same inputs."""
    from compiler.pipeline import compile_model, model_bytes

    data = model_bytes(model)
    opts = CompileOptions.from_dict({**(options or {}), "threads": threads})
    t0 = time.perf_counter()
    result = compile_model(data, target, opts, cache=cache)
    compile_s = time.perf_counter() - t0
    tf, ref = compare_latency(result.artifact_path, data, threads)
    return BenchResult(name, threads, round(compile_s, 3), len(result.kernels), result.cache_hits,
                       result.validation.get("rel_l2_error", float("nan")),
                       tf * 1e3, ref * 1e3, result.kernels)
