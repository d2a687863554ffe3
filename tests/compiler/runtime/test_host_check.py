"""The loader refuses, with the missing ISA features named, an artifact built for a CPU the
host is not, before anything of it is loaded (never a SIGILL); a compile for such a target
still builds and says it was not validated."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.cache import MemoryKernelCache
from compiler.errors import ArtifactError, HostMismatchError
from compiler.pipeline import compile_model
from compiler.runtime import cpu as cpu_runtime
from compiler.runtime import load
from compiler.target import cpu as cpu_target
from compiler.target import get_target, list_targets
from compiler.target.cpu import host_cannot_run
from compiler.target.cpu_models import CPU_MODELS


def _model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 32])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _compile(target: str, path: Path) -> dict:
    return compile_model(_model(), target, cache=MemoryKernelCache(), output=path).report


def test_an_avx512_artifact_on_an_avx2_host_is_refused_by_name(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "v4.tar.gz"
    _compile("cpu:x86-64-v4", path)
    facts = cpu_target.read_cpu_facts()
    avx2_host = replace(facts, features=tuple(sorted(CPU_MODELS["x86-64-v3"].features)))
    monkeypatch.setattr(cpu_target, "read_cpu_facts", lambda: avx2_host)  # the host's flags, simulated

    def no_dlopen(path: Path) -> None:
        raise AssertionError("the library was opened")

    monkeypatch.setattr(cpu_runtime, "_open_library", no_dlopen)
    with pytest.raises(HostMismatchError, match=r"cpu:x86-64-v4.*avx512bw, avx512cd, avx512dq, avx512f, avx512vl"):
        load(path)


def test_another_machine_is_refused() -> None:
    manifest = {"target": "cpu:neoverse", "cpu_machine": "aarch64", "cpu_features": ["neon"]}
    with pytest.raises(HostMismatchError, match=r"aarch64 processors.*this host is x86_64"):
        cpu_runtime.check_host(manifest, replace(cpu_target.read_cpu_facts(), machine="x86_64", features=("sse2",)))
    with pytest.raises(ArtifactError, match="bad cpu_machine"):
        cpu_runtime.check_host({"cpu_machine": 3, "cpu_features": "avx"}, cpu_target.read_cpu_facts())


def test_a_target_this_host_cannot_run_is_cross_compiled_and_not_validated(tmp_path: Path) -> None:
    """Every host lacks some model's features (Intel: AMD's sse4a; AMD: avx512_fp16;
    AVX2-only: AVX-512): the real check, on the real host."""
    foreign = [n for n in list_targets() if n.startswith("cpu:") and host_cannot_run(get_target(n))]
    if not foreign:
        pytest.skip("this host runs every named CPU model")
    name = foreign[0]
    path = tmp_path / "foreign.tar.gz"
    report = _compile(name, path)
    validation = report["validation"]
    assert validation["passed"] is None
    assert validation["skipped"].startswith("not validated on this ISA")
    assert all(c["measured_us"] is None for c in report["kernels"])  # nothing was timed either
    missing = host_cannot_run(get_target(name))
    with pytest.raises(HostMismatchError, match=", ".join(missing)):
        load(path)


def test_a_runnable_named_target_validates_and_says_where(tmp_path: Path) -> None:
    runnable = [n for n in ("cpu:x86-64-v3", "cpu:x86-64-v2") if not host_cannot_run(get_target(n))]
    path = tmp_path / "v.tar.gz"
    report = _compile(runnable[0], path)
    assert report["validation"]["passed"] is True
    assert report["validation"]["validated_on"]
    out = load(path).run({"x": np.ones((8, 64), np.float32)})["z"]
    assert out.shape == (8, 32)
