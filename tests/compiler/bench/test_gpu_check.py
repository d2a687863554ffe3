"""The GPU check's bookkeeping, which runs without a GPU: pytest summaries read back,
the hottest kernels ranked, the table's ratios and geomeans; and the ONNX backend
refusing device CUDA where no GPU can run it."""

from __future__ import annotations

import math
import unittest
from pathlib import Path

import pytest

from compiler.bench.gpu_check import (
    ModelRow,
    Report,
    hot_kernels,
    run_pytest,
    table,
    timed_candidates,
)
from compiler.bench.models import ZOO
from compiler.onnx_backend import TileforgeBackend
from compiler.runtime.cuda import gpu_runs


def test_run_pytest_reads_the_counts_and_failures_of_a_real_run(tmp_path: Path) -> None:
    tests = tmp_path / "test_sample.py"
    tests.write_text("import pytest\n"
                     "def test_ok(): assert 1\n"
                     "def test_bad(): assert 0\n"
                     "@pytest.mark.skip(reason='x')\n"
                     "def test_skipped(): pass\n")
    got = run_pytest("sample", ["-p", "no:xdist", str(tests)], tmp_path, timeout=120)
    assert (got["passed"], got["failed"], got["skipped"], got["rc"]) == (1, 1, 1, 1)
    assert len(got["failures"]) == 1 and "test_sample.py::test_bad" in got["failures"][0]
    assert (tmp_path / "sample.log").read_text().count("test_bad") >= 1


def test_hot_kernels_rank_by_median_and_carry_the_model_estimate() -> None:
    times = {"a": [1.0, 9.0, 2.0], "b": [3.0, 3.0, 3.0], "c": [0.5]}
    info = [{"symbol": "b", "op_pattern": "MatMul", "estimated_us": 2.5, "measured_us": None,
             "tile": {"block": [1]}}]
    hot = hot_kernels(times, info, top=2)
    assert [k["symbol"] for k in hot] == ["b", "a"]
    assert hot[0]["us"] == 3000.0 and hot[0]["ops"] == "MatMul" and hot[0]["estimated_us"] == 2.5
    assert hot[0]["share"] == round(3.0 / 5.5, 3) and hot[1]["ops"] == "?"


def test_table_ratios_and_geomeans() -> None:
    report = Report(device={"name": "GPU", "target": "cuda:h100"}, copy_gbps=3000.0)
    report.suites["tests"] = {"rc": 0, "seconds": 1.0, "passed": 3}
    report.models = [
        ModelRow("m1", "zoo", tileforge_ms=1.0, eager_ms=4.0, compiled_ms=2.0, passed=True,
                 rel_l2_error=1e-7, bytes_moved=3 * 10**9, unsplit_ms=1.5),
        ModelRow("m2", "torch", tileforge_ms=2.0, eager_ms=2.0, compiled_ms=1.0, passed=True,
                 rel_l2_error=2e-7),
        ModelRow("m3", "torch", note="export failed: X"),
    ]
    report.models[0].candidates = [{"kind": "gemm", "estimated_us": 10.0, "measured_us": m} for m in (20.0, 80.0)]
    report.models[0].candidates.append({"kind": "general", "estimated_us": 0.3, "measured_us": 3.0})  # launch rate
    report.models[0].split_k = [{"node": 3, "ops": ["Conv", "Relu"], "slices": 8, "split_us": 12.5,
                                 "whole_us": 40.0, "kept": "split", "by": "timed"}]
    text = "\n".join(table(report))
    assert "| m1 | zoo | 0 | 0.0 | 1.0e-07 | 1.000 | 1.500 | 4.000 | 2.000 | 4.00x | 2.00x | 3000 |" in text
    assert "| m2 | torch | 0 | 0.0 | 2.0e-07 | 2.000 | - | 2.000 |" in text  # nothing split
    assert f"{math.sqrt(4.0 * 1.0):.2f}x vs PyTorch eager, {math.sqrt(2.0 * 0.5):.2f}x vs" in text
    assert "- m3: export failed: X" in text and "- tests: 3 passed, 0 failed" in text
    assert "| gemm | 2 | 4.00x | 2.00x | 8.00x |" in text  # measured over estimated: 2x and 8x
    assert "| general |" not in text  # timed at the launch rate: left out
    assert "| m1 | Conv+Relu | 8 | 12.5 | 40.0 | split (timed) |" in text


def test_timed_candidates_come_from_the_report() -> None:
    kernels = [{"symbol": "k", "candidates": [
        {"tile": {"launch": {"kind": "gemm"}}, "estimated_us": 2.0, "measured_us": 3.0},
        {"tile": {"launch": {"kind": "gemm"}}, "estimated_us": 2.0, "measured_us": None},  # not timed
    ]}, {"symbol": "c", "candidates": []}]  # a cache hit
    assert timed_candidates(kernels) == [{"kind": "gemm", "estimated_us": 2.0, "measured_us": 3.0}]


@pytest.mark.skipif(gpu_runs("sm_80") or gpu_runs("sm_90"), reason="this machine has a GPU")
def test_the_onnx_backend_refuses_cuda_without_a_gpu() -> None:
    assert TileforgeBackend.supports_device("CPU")
    assert not TileforgeBackend.supports_device("CUDA")
    with pytest.raises(unittest.SkipTest, match="needs a GPU"):
        TileforgeBackend.prepare(ZOO["mlp_gelu"](), device="CUDA")
