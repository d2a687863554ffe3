"""Validation against onnxruntime: real artifact, perturbed results, NaNs, index inputs."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from handbuilt import X_NAME, onnx_model
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ModelError
from compiler.runtime import TensorSpec, load
from compiler.runtime.validate import compare, index_bounds, random_inputs, validate, vanishing


class NumpyExecutable:
    """A stand-in executable: a numpy function, optionally perturbed."""

    def __init__(self, inputs, outputs, fn):
        self.input_specs, self.output_specs, self.fn = inputs, outputs, fn
        self.seen = None

    def set_threads(self, n: int) -> None:
        pass

    def run(self, feeds):
        self.seen = feeds
        return self.fn(**feeds)


def unary_model(op: str, name_in: str = "in", name_out: str = "out", f: int = TensorProto.FLOAT) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node(op, [name_in], [name_out])], "g",
                          [helper.make_tensor_value_info(name_in, f, [3, 5])],
                          [helper.make_tensor_value_info(name_out, f, [3, 5])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def unary_exe(fn, name_in: str = "in", name_out: str = "out", dt: str = "float32") -> NumpyExecutable:
    return NumpyExecutable([TensorSpec(name_in, (3, 5), dt)], [TensorSpec(name_out, (3, 5), dt)],
                           lambda **f: {name_out: fn(f[name_in])})


def test_real_artifact_passes(artifact: Path):
    model = onnx_model()
    for m in (model, model.SerializeToString()):
        r = validate(m, load(artifact), seed=1)
        assert r["passed"] is True and r["rel_l2_error"] < 1e-6
        assert set(r["outputs"]) == {o.name for o in model.graph.output}


def test_errors_are_measured_and_judged_against_the_tolerance():
    exact = validate(unary_model("Neg"), unary_exe(np.negative))
    assert exact["passed"] and exact["max_abs_error"] == 0.0 and exact["tolerance"] == 1e-4
    off = validate(unary_model("Neg"), unary_exe(lambda a: -a * np.float32(1.01)))
    assert not off["passed"]
    assert abs(off["rel_l2_error"] - 0.01) < 1e-5
    assert validate(unary_model("Neg"), unary_exe(lambda a: -a * np.float32(1.01)), tolerance=0.02)["passed"]


def test_half_outputs_pass_within_their_own_precision():
    """Last bits of a half result differ between correct implementations (1e-4 is below
    float16's precision); a real error still fails."""
    model = unary_model("Neg", f=TensorProto.FLOAT16)

    def last_bit_flipped(a):
        return (-a).view(np.uint16) ^ np.uint16(1)

    assert validate(model, unary_exe(lambda a: last_bit_flipped(a).view(np.float16), dt="float16"))["passed"]
    assert not validate(model, unary_exe(lambda a: -a * np.float16(1.01), dt="float16"))["passed"]


def test_a_model_onnxruntime_refuses_is_a_model_error():
    """Min takes no int64 before opset 12: an exporter's type error, which onnx's checker misses."""
    model = unary_model("Min", f=TensorProto.INT64)
    model.opset_import[0].version = 11
    exe = NumpyExecutable([TensorSpec("in", (3, 5), "int64")], [TensorSpec("out", (3, 5), "int64")],
                          lambda **f: {"out": f["in"]})
    with pytest.raises(ModelError, match=r"onnxruntime, the reference, cannot load the model: .*Type Error"):
        validate(model, exe)


def test_same_seed_same_inputs_and_weird_names_work():
    name_in, name_out = 'x"; /* */\n', "y/ü:0"
    a = unary_exe(np.abs, name_in, name_out)
    b = unary_exe(np.abs, name_in, name_out)
    assert validate(unary_model("Abs", name_in, name_out), a, seed=5)["passed"]
    validate(unary_model("Abs", name_in, name_out), b, seed=5)
    np.testing.assert_array_equal(a.seen[name_in], b.seen[name_in])


def test_nan_positions_must_match():
    ours, ref = np.array([1.0, np.nan, np.inf]), np.array([1.0, np.nan, np.inf])
    assert compare(ours, ref) == {"max_abs_error": 0.0, "rel_l2_error": 0.0, "nan_match": True,
                                  "shape_match": True}
    assert not compare(np.array([1.0, 2.0, np.inf]), ref)["nan_match"]
    sqrt = validate(unary_model("Sqrt"), unary_exe(lambda a: np.sqrt(np.abs(a))))
    assert not sqrt["passed"] and not sqrt["outputs"]["out"]["nan_match"]
    assert not compare(np.zeros(3), np.zeros(4))["shape_match"]


def test_outputs_with_no_normal_number_pass_with_a_warning_that_names_them():
    """An output that is all zero (or subnormal, or not finite) agrees with anything that
    zeroes or flushes: validation still passes it, and says so."""
    assert vanishing(np.zeros(4, np.float32)) and vanishing(np.full(3, 1e-40, np.float32))
    assert vanishing(np.array([0.0, np.nan, np.inf], np.float32)) and vanishing(np.full(2, 1e-310))
    assert not vanishing(np.array([0.0, 1e-40, 1e-37], np.float32)) and not vanishing(np.zeros(3, np.int64))
    assert not vanishing(np.zeros(0, np.float32))
    zeroed = validate(unary_model("Relu"), unary_exe(lambda a: np.maximum(a, 0)))
    assert zeroed["passed"] and "warning" not in zeroed
    model = unary_model("Relu")
    model.graph.node[0].input[0] = "neg"
    model.graph.node.insert(0, helper.make_node("Neg", ["in"], ["neg"]))
    model.graph.node.insert(0, helper.make_node("Abs", ["in"], ["in_abs"]))
    model.graph.node[1].input[0] = "in_abs"  # out = relu(-|in|): zeros everywhere
    r = validate(model, unary_exe(lambda a: np.zeros_like(a)))
    assert r["passed"] and "onnxruntime's out holds no normal number" in r["warning"]
    assert not validate(model, unary_exe(lambda a: a))["passed"]


def gather_model() -> onnx.ModelProto:
    data = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "data")
    g = helper.make_graph(
        [helper.make_node("Gather", ["data", "idx"], ["out"], axis=0)], "g",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [4]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 2])], [data])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_index_inputs_stay_in_range_and_other_inputs_are_typed():
    model = gather_model()
    assert index_bounds(model) == {"idx": 3}
    specs = [TensorSpec("idx", (1000,), "int64"), TensorSpec("flag", (4,), "bool"),
             TensorSpec(X_NAME, (2,), "int32"), TensorSpec("f", (2,), "float16")]
    feeds = random_inputs(specs, model, seed=0)
    assert feeds["idx"].dtype == np.int64 and set(np.unique(feeds["idx"])) == {0, 1, 2}
    assert feeds["flag"].dtype == np.bool_
    assert feeds[X_NAME].dtype == np.int32 and feeds[X_NAME].min() >= 0 and feeds[X_NAME].max() < 4
    assert feeds["f"].dtype == np.float16
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    exe = NumpyExecutable([TensorSpec("idx", (4,), "int64"), TensorSpec("flag", (4,), "bool")],
                          [TensorSpec("out", (4, 2), "float32")], lambda idx, flag: {"out": table[idx]})
    assert validate(model, exe)["passed"]


def test_the_reference_leaves_no_thread_spinning_after_a_run():
    """The reference runs beside the compilation, which times kernels right after it: a
    thread of onnxruntime's pool spinning for work (its default, 50-60 ms after a run)
    would hold one of the cores they run on."""
    from compiler.runtime.validate import reference_session

    proto = onnx_model()
    session = reference_session(proto, proto.SerializeToString())
    assert session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
