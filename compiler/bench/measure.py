"""Latency of a compiled model against onnxruntime, in one process, same thread count."""

from __future__ import annotations

import functools
import hashlib
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from compiler.cache import KernelCache
from compiler.errors import ArtifactError
from compiler.options import CompileOptions
from compiler.runtime.executable import Executable
from compiler.runtime.interleaved import calls, round_ratios, time_phases
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
    # the 10th and 90th percentiles of the speedup taken round by round (`spread`)
    speedup_spread: tuple[float, float] | None = None

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


@dataclass
class ArtifactTiming:
    """One artifact of a model against onnxruntime (`time_artifacts`): medians in
    milliseconds, and its outputs' error against onnxruntime's on the same inputs."""

    artifact: str
    threads: int
    tileforge_ms: float
    onnxruntime_ms: float
    rel_l2_error: float
    passed: bool
    speedup_spread: tuple[float, float] | None = None  # as BenchResult's

    @property
    def speedup(self) -> float:
        return self.onnxruntime_ms / self.tileforge_ms

    def to_dict(self) -> dict:
        return {**asdict(self), "speedup_vs_onnxruntime": round(self.speedup, 3)}


def compare_latency(artifact: Path, model: bytes, threads: int, seed: int = 0
                    ) -> tuple[float, float, tuple[float, float]]:
    """Median seconds per run of (the artifact, onnxruntime) on the same random inputs, and
    the spread of the speedup round by round (`spread`)."""
    from compiler.runtime import load

    exe = load(artifact)
    exe.set_threads(threads)
    (ours,), ref, (band,) = _interleaved_medians([exe], model, _inputs(exe, onnx.load_from_string(model), seed),
                                                 threads)
    return ours, ref, band


def time_artifacts(artifacts: Sequence[Path], model: bytes, threads: int, seed: int = 0,
                   tolerance: float = 1e-4) -> list[ArtifactTiming]:
    """Artifacts compiled from `model` (by two compilers, say, or with two sets of
    options), each run once against onnxruntime on the same random inputs, then all of
    them and onnxruntime timed in alternation on those inputs, in this process: a change
    in the machine's load lands on all of them alike, where runs one after another differ
    by more than most changes to the compiler (on a shared 2-core host, resnext at 2
    threads ran 0.59x onnxruntime in one run of the suite and 1.01x when rerun at once).
    ArtifactError where one was compiled from another model or cannot run here."""
    from compiler.runtime import load_folder
    from compiler.runtime.artifact import read_artifact
    from compiler.runtime.validate import reference_for, validate

    digest = hashlib.sha256(model).hexdigest()
    exes = []
    for path in artifacts:
        with tempfile.TemporaryDirectory(prefix="tileforge-bench-") as tmp:
            try:
                manifest, folder = read_artifact(path, tmp)
                if manifest.get("model_sha256") != digest:
                    raise ArtifactError(f"compiled from another model (its manifest's model_sha256 is not "
                                        f"this model's {digest[:12]}...)")
                exes.append(load_folder(manifest, folder, threads))
            except ArtifactError as e:  # named, where the reader's message does not name it
                raise type(e)(str(e) if str(path) in str(e) else f"{path}: {e}") from None
    reference = reference_for(model)
    feeds = _inputs(exes[0], reference.proto, seed)
    checks = [validate(model, e, seed, tolerance, inputs=feeds, reference=reference) for e in exes]
    ours, ref, spreads = _interleaved_medians(exes, model, feeds, threads)
    return [ArtifactTiming(str(path), threads, t * 1e3, ref * 1e3, check["rel_l2_error"], check["passed"], band)
            for path, t, check, band in zip(artifacts, ours, checks, spreads, strict=True)]


def _inputs(exe: Executable, model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """The validation's random inputs: integer ones (token ids, indices) stay in range."""
    from compiler.runtime.validate import random_inputs

    return random_inputs(exe.input_specs, model, seed)


def _interleaved_medians(exes: Sequence[Executable], model: bytes, feeds: Mapping[str, np.ndarray],
                         threads: int) -> tuple[list[float], float, list[tuple[float, float]]]:
    """Median seconds per run of each of `exes` and of onnxruntime, taken in alternation,
    and each one's `spread`."""
    sess = ort_session(model, threads)
    phases = time_phases([functools.partial(e.run, feeds) for e in exes] + [lambda: sess.run(None, feeds)])
    runs = [calls(fn) for fn in phases]
    return ([statistics.median(r) for r in runs[:-1]], statistics.median(runs[-1]),
            [spread(round_ratios(phases[-1], p)) for p in phases[:-1]])


def spread(ratios: Sequence[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles of speedups taken round by round: how far this host's
    load moved the ratio while it was timed (the reported speedup is the medians' ratio)."""
    low, high = np.percentile(np.asarray(ratios, np.float64), [10, 90])
    return round(float(low), 3), round(float(high), 3)


def bench_model(model: bytes | str | Path | onnx.ModelProto, name: str = "model", target: str | Target = "cpu",
                threads: int = 1, options: dict | None = None,
                cache: KernelCache | None = None) -> BenchResult:
    """Compile (validated against onnxruntime), then time both runtimes on the same inputs."""
    from compiler.pipeline import compile_model, model_bytes

    data = model_bytes(model)
    opts = CompileOptions.from_dict({**(options or {}), "threads": threads})
    # the artifact goes once timed: left in compile_model's own folder, a `make bench` run
    # left some 80 of them (gigabytes) in the temporary directory
    with tempfile.TemporaryDirectory(prefix="tileforge-bench-") as folder:
        t0 = time.perf_counter()
        result = compile_model(data, target, opts, cache=cache, output=Path(folder) / "model.tar.gz")
        compile_s = time.perf_counter() - t0
        tf, ref, ratios = compare_latency(result.artifact_path, data, threads)
    return BenchResult(name, threads, round(compile_s, 3), len(result.kernels), result.cache_hits,
                       result.validation.get("rel_l2_error", float("nan")),
                       tf * 1e3, ref * 1e3, result.kernels, ratios)
