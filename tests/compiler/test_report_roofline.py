"""report.json of every artifact holds the roofline of the kernels the compile measured."""

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.cache import MemoryKernelCache
from compiler.pipeline import compile_model
from compiler.runtime.artifact import REPORT, read_artifact
from compiler.target.measure import measure_cpu

M = K = N = 256  # big enough that the compile times its top-k candidates


def _matmul_relu():
    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((K, N)).astype(np.float32), "W")
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "mm",
        [helper.make_tensor_value_info("x", f, [M, K])], [helper.make_tensor_value_info("z", f, [M, N])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _report(tmp_path) -> dict:
    result = compile_model(_matmul_relu(), "cpu", {"threads": 1}, cache=MemoryKernelCache(),
                           output=tmp_path / "a.tar.gz")
    _, folder = read_artifact(result.artifact_path, tmp_path)
    report = json.loads((folder / REPORT).read_text())
    assert report["roofline"] == result.report["roofline"]
    return report


def test_measured_kernels_get_rows_against_the_measured_bounds(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFORGE_HOME", str(tmp_path))
    stored = measure_cpu(copy_bytes=32 << 20, matmul_n=256, repeats=3)
    report = _report(tmp_path)
    roofline = report["roofline"]
    cores = stored["cores"]
    assert roofline["bounds"]["peak_gflops"] == pytest.approx(stored["flops_all_threads"] / cores / 1e9,
                                                              abs=1e-3)
    measured = {k["symbol"]: k["measured_us"] for k in report["kernels"] if k["measured_us"] is not None}
    assert measured, "the compile timed no kernel"
    rows = roofline["rows"]
    assert {r["symbol"]: r["measured_us"] for r in rows} == measured
    (row,) = rows
    assert row["op_pattern"] == "MatMul+Relu" and row["flops"] == 2 * M * N * K + M * N  # the Relu: one op an output
    assert row["dram_bytes"] == (M * K + K * N + M * N) * 4
    # The closer bound follows the measured peak and bandwidth (on a loaded host the bandwidth
    # measured may put this matmul's ridge either side), so it is derived from them here.
    bounds = roofline["bounds"]
    compute_us = row["flops"] / (bounds["peak_gflops"] * 1e3)
    memory_us = row["dram_bytes"] / (bounds["bandwidth_gbs"] * 1e3)
    assert row["bound"] == ("compute" if compute_us >= memory_us else "memory")
    assert row["share"] is None and roofline["model_us"] is None  # the compile does not time the model


def test_without_measurements_the_report_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFORGE_HOME", str(tmp_path))
    roofline = _report(tmp_path)["roofline"]
    assert roofline["bounds"] is None and "--measure" in roofline["note"]
    assert all(r["bound"] is None for r in roofline["rows"])
