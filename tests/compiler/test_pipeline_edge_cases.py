"""Edge cases of whole compilations."""

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.pipeline import compile_model
from compiler.runtime import load


def test_zero_size_integer_weight_compiles_and_runs(tmp_path: Path):
    empty = numpy_helper.from_array(np.zeros((0,), np.int64), "e")
    g = helper.make_graph([helper.make_node("Concat", ["x", "e"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [3])], [empty])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    r = compile_model(m, "cpu", output=tmp_path / "a.tar.gz")
    assert r.validation["passed"]
    np.testing.assert_array_equal(load(r.artifact_path).run({"x": np.arange(3)})["y"], np.arange(3))


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_padded_average_pool_borders_match_onnxruntime(count_include_pad: int, tmp_path: Path):
    """Regression: gcc 12 miscompiled these border sums (compiler/codegen/c/workarounds.py)."""
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[5, 5], pads=[2, 2, 2, 2],
                            count_include_pad=count_include_pad)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 5, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    r = compile_model(m, "cpu", {"measure": False}, output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation


def test_kernels_of_a_model_that_fails_validation_are_not_cached(tmp_path: Path, monkeypatch):
    from compiler import pipeline
    from compiler.bench.models import mlp_gelu
    from compiler.cache import FileKernelCache
    from compiler.errors import ValidationError

    cache = FileKernelCache(tmp_path / "kernels")
    monkeypatch.setattr(pipeline, "_validate", lambda *a: ({"passed": False, "rel_l2_error": 0.5,
                                                            "max_abs_error": 1.0, "tolerance": 1e-4}, None))
    with pytest.raises(ValidationError):
        compile_model(mlp_gelu(batch=1), "cpu", {"measure": False}, cache=cache, output=tmp_path / "a.tar.gz")
    assert not list((tmp_path / "kernels").rglob("*.json"))
    assert not (tmp_path / "a.tar.gz").exists()  # no artifact that failed validation is left behind
    monkeypatch.undo()
    r = compile_model(mlp_gelu(batch=1), "cpu", {"measure": False}, cache=cache, output=tmp_path / "b.tar.gz")
    stored = [json.loads((tmp_path / "kernels" / k["key"][:2] / f"{k['key']}.json").read_text())
              for k in r.kernels]
    assert all(e["validation_error"] == r.validation["rel_l2_error"] for e in stored)


def test_a_validated_artifact_is_packed_once_with_its_validation(tmp_path: Path, monkeypatch):
    """Validation runs on the files before they are packed, so the tarball is written once."""
    from compiler import package
    from compiler.bench.models import mlp_gelu
    from compiler.runtime.artifact import REPORT, read_artifact

    writes = []
    write = package.write_artifact
    monkeypatch.setattr(package, "write_artifact", lambda path, *a: writes.append(path) or write(path, *a))
    r = compile_model(mlp_gelu(batch=1), "cpu", {"measure": False}, output=tmp_path / "a.tar.gz")
    assert writes == [tmp_path / "a.tar.gz"]
    assert list(r.stage_seconds)[-2:] == ["validate", "package"]
    _, folder = read_artifact(r.artifact_path, tmp_path)
    report = json.loads((folder / REPORT).read_text())
    assert report["validation"]["passed"] and report["validation"] == json.loads(json.dumps(r.validation))
    assert load(r.artifact_path).run({"x": np.ones((1, 256), np.float32)})["y"].shape == (1, 128)


def test_one_thread_compiles_are_modelled_for_one_core(tmp_path: Path):
    """A compilation for n threads schedules and models its kernels for n cores: a
    compute-bound matmul's predicted time doubles from two cores to one."""
    from compiler.target import get_target

    if get_target("cpu").units < 2:
        pytest.skip("this machine has one core")
    w = numpy_helper.from_array(np.ones((256, 256), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 256])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    est = {}
    for threads in (1, 2):
        r = compile_model(m, "cpu", {"threads": threads, "measure": False, "validate": False},
                          output=tmp_path / f"a{threads}.tar.gz")
        est[threads] = sum(k["estimated_us"] for k in r.kernels)
    assert est[1] > 1.5 * est[2]


def test_a_chain_of_thousands_of_element_wise_nodes_compiles_in_bounded_kernels(tmp_path: Path):
    """A hostile 5,000-node chain once overflowed Python's stack (fused into one expression)
    and took quadratic time; fusion now stops at MAX_EXPR_DEPTH and the result still runs."""
    from compiler.schedule.tilegraph.registers import MAX_EXPR_DEPTH

    n = 5000
    names = ["x", *(f"t{i}" for i in range(n - 1)), "y"]
    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [names[i]], [names[i + 1]]) for i in range(n)]
    graph = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    r = compile_model(model, "cpu", {"measure": False}, output=tmp_path / "deep.tar.gz")
    assert r.validation["passed"] is True
    assert n // MAX_EXPR_DEPTH <= len(r.kernels) <= 2 * n // MAX_EXPR_DEPTH + 2


def test_a_model_onnxruntime_refuses_fails_its_compile_cleanly(tmp_path: Path):
    """The reference loads on a thread beside the compilation: its refusal (Min takes no
    int64 before opset 12, which onnx's checker misses) is the compile's ModelError, with
    no artifact and no cache entry left behind."""
    from compiler.cache import FileKernelCache
    from compiler.errors import ModelError

    g = helper.make_graph([helper.make_node("Min", ["x", "x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.INT64, [3, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [3, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 6
    with pytest.raises(ModelError, match="onnxruntime, the reference, cannot load the model"):
        compile_model(m, "cpu", cache=FileKernelCache(tmp_path / "kernels"), output=tmp_path / "a.tar.gz")
    assert not (tmp_path / "a.tar.gz").exists() and not list((tmp_path / "kernels").rglob("*.json"))
    unvalidated = compile_model(m, "cpu", {"validate": False}, output=tmp_path / "b.tar.gz")
    np.testing.assert_array_equal(load(unvalidated.artifact_path).run({"x": np.arange(15).reshape(3, 5)})["y"],
                                  np.arange(15).reshape(3, 5))
