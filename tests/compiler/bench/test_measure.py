"""The bench's compile-and-time step (compiler/bench/measure.py `bench_model`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from compiler.bench.measure import bench_model
from compiler.cache import MemoryKernelCache


def test_a_benched_model_leaves_no_artifact_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `make bench` run compiles some 80 models: their artifacts go once timed."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    result = bench_model(model, "relu", threads=1, cache=MemoryKernelCache())
    assert result.tileforge_ms > 0 and result.rel_l2_error < 1e-6
    assert list(tmp_path.iterdir()) == []
