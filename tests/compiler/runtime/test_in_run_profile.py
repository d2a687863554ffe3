"""Kernels timed inside the model's own runs: the entry point's clock stamps, how a wave's
time is shared among its kernels, and the per-kernel timer that artifacts without the
stamps still get."""

from pathlib import Path

import numpy as np
import pytest
from handbuilt import X_NAME, graph, onnx_model, reference, whole

from compiler.backends.c import CBackend
from compiler.errors import ArtifactError
from compiler.options import CompileOptions
from compiler.pipeline import compile_model
from compiler.runtime import cpu, load
from compiler.runtime.cpu import _wave_shares
from compiler.schedule.planner import build_plan


def _feeds() -> dict[str, np.ndarray]:
    return {X_NAME: np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)}


def test_a_wave_is_shared_among_its_kernels_as_the_threads_spent_it():
    # stamps: start, MatMul called, barrier | Add, Exp called, barrier; a row per thread
    names = ["", "mm", "", "add", "exp", ""]
    stamps = np.array([[10.0, 11.0, 11.5, 12.0, 12.0, 14.0],   # thread 0: Add 0.5 s, Exp none
                       [10.0, 11.5, 11.5, 11.5, 13.0, 14.0]])  # thread 1: Add none, Exp 1.5 s
    shares = _wave_shares(names, stamps)
    assert [n for n, _ in shares] == ["mm", "add", "exp"]
    ms = [t for _, t in shares]
    # the first wave's 1.5 s (barrier wait included) is its one kernel's; the second wave's
    # 2.5 s is split as the threads spent it: 0.5 s in the Add, 1.5 s in the Exp
    assert ms == pytest.approx([1500.0, 625.0, 1875.0])
    assert sum(ms) == pytest.approx(1e3 * (stamps[0, -1] - stamps[0, 0]))


def test_every_kernel_call_is_timed_and_the_run_is_unchanged(artifact: Path):
    exe = load(artifact, threads=2)
    assert exe.profiles_in_run
    times = exe.kernel_times(_feeds(), runs=4, warmup=1)
    plan = build_plan(graph(), "cpu:test:0", whole)  # the artifact's plan: same symbols
    assert set(times) == {k.symbol for k in plan.kernels}
    assert all(len(ms) == 4 and all(t > 0 for t in ms) for ms in times.values())
    out = exe.run(_feeds())  # profiling is off again, and the results are the model's
    for name, want in reference(_feeds()[X_NAME]).items():
        np.testing.assert_allclose(out[name], want, rtol=1e-5, atol=1e-6)


def test_an_artifact_without_stamps_is_timed_kernel_by_kernel(monkeypatch):
    result = compile_model(onnx_model(), "cpu", {"threads": 1})
    monkeypatch.setattr(cpu, "_profile_functions", lambda lib: None)  # as a library built before them
    exe = load(result.artifact_path)
    assert not exe.profiles_in_run
    with pytest.raises(ArtifactError, match="without in-run profiling"):
        exe.kernel_times(_feeds())
    times = CBackend().time_plan(result.plan, result.artifact_path, _feeds(), CompileOptions(threads=1),
                                 result.target)
    assert set(times) == {k.symbol for k in result.plan.kernels} and all(t > 0 for t in times.values())
