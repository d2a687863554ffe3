"""Latency of a compiled model against onnxruntime, in one process, same thread count."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import onnx
import onnxruntime as ort

from compiler.cache import KernelCache
from compiler.options import CompileOptions
from compiler.runtime.interleaved import time_interleaved
from compiler.target.base import Target


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
