"""Node patterns that the PyTorch exporters write, compiled end to end and checked against
onnxruntime (each model is built here in a few nodes, as the exporter lays them out)."""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.pipeline import compile_model


def exported(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: list[str],
             weights: dict[str, np.ndarray] | None = None, opset: int = 17) -> onnx.ModelProto:
    """A float32 model over `inputs` (name -> shape) with untyped outputs, as exported."""
    g = helper.make_graph(nodes, "exported",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                          [numpy_helper.from_array(v, k) for k, v in (weights or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def assert_compiles_and_validates(m: onnx.ModelProto, tmp_path: Path) -> None:
    r = compile_model(m, "cpu", {"measure": False}, output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation


def test_unbiased_variance_squares_a_difference_with_one_mul(tmp_path: Path):
    """torch.var(x, -1, keepdim=True): Mul(d, d) of the difference from the mean."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
             helper.make_node("Sub", ["x", "m"], ["d"]),
             helper.make_node("Mul", ["d", "d"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["v"], axes=[-1]),
             helper.make_node("Mul", ["v", "n"], ["s"]),
             helper.make_node("Div", ["s", "n1"], ["y"])]
    m = exported(nodes, {"x": [2, 8, 16]}, ["y"], {"n": np.array(16, np.float32), "n1": np.array(15, np.float32)})
    assert_compiles_and_validates(m, tmp_path)


def test_index_assignment_scatters_rows_through_a_unit_index_dim(tmp_path: Path):
    """y[:, 0] = v: ScatterND with indices [batch, 1, 2], whose update position r0 * 1 + r1
    uses the reduce axes as values."""
    ind = np.array([[[0, 0]], [[1, 0]]], np.int64)
    nodes = [helper.make_node("ScatterND", ["x", "ind", "v"], ["y"])]
    m = exported(nodes, {"x": [2, 6, 8], "v": [2, 1, 8]}, ["y"], {"ind": ind})
    assert_compiles_and_validates(m, tmp_path)


def test_fake_quantized_conv_validates_against_the_models_own_arithmetic(tmp_path: Path):
    """torch.fake_quantize_* exports QuantizeLinear / DequantizeLinear around a float Conv;
    onnxruntime's optimizer would turn it into integer kernels with a requantized bias."""
    rng = np.random.default_rng(0)
    weights = {"w": rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8),
               "w_scale": np.full(8, 0.02, np.float32), "w_zero": np.zeros(8, np.int8),
               "bias": rng.standard_normal(8).astype(np.float32),
               "scale": np.array(0.05, np.float32), "zero": np.array(128, np.uint8),
               "out_scale": np.array(0.1, np.float32), "out_zero": np.array(0, np.uint8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["qx"]),
             helper.make_node("DequantizeLinear", ["qx", "scale", "zero"], ["dx"]),
             helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["dw"], axis=0),
             helper.make_node("Conv", ["dx", "dw", "bias"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "out_scale", "out_zero"], ["qy"]),
             helper.make_node("DequantizeLinear", ["qy", "out_scale", "out_zero"], ["y"])]
    assert_compiles_and_validates(exported(nodes, {"x": [2, 3, 8, 8]}, ["y"], weights, opset=13), tmp_path)


def test_split_into_a_sequence_of_heads(tmp_path: Path):
    """q, k, v = qkv.split(d, dim=2) exported with optimize=False: SplitToSequence, SequenceAt."""
    at = {k: np.array(k, np.int64) for k in range(3)}
    nodes = [helper.make_node("SplitToSequence", ["qkv", "d"], ["seq"], axis=2),
             *(helper.make_node("SequenceAt", ["seq", f"at{k}"], [f"p{k}"]) for k in range(3)),
             helper.make_node("MatMul", ["p0", "kt"], ["s"]),
             helper.make_node("Add", ["s", "p2"], ["y"])]
    weights = {"d": np.array(8, np.int64), "kt": np.eye(8, dtype=np.float32),
               **{f"at{k}": v for k, v in at.items()}}
    assert_compiles_and_validates(exported(nodes, {"qkv": [2, 4, 24]}, ["y"], weights, opset=18), tmp_path)


def test_a_value_returned_twice_is_listed_twice(tmp_path: Path):
    """return y, s, y: the dynamo exporter (optimize=False) names the graph output 'y' twice."""
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Sigmoid", ["x"], ["s"])]
    assert_compiles_and_validates(exported(nodes, {"x": [2, 3]}, ["y", "s", "y"]), tmp_path)


def test_ceil_mode_pool_whose_kernel_overhangs_the_input(tmp_path: Path):
    """HF EfficientNet's nn.AvgPool2d(1280, ceil_mode=True) over a 7x7 map: one window, clipped
    to the input, which onnxruntime averages over the 49 elements it holds."""
    nodes = [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[1280, 1280], strides=[1280, 1280],
                              pads=[0, 0, 0, 0], ceil_mode=1, count_include_pad=1)]
    assert_compiles_and_validates(exported(nodes, {"x": [1, 64, 7, 7]}, ["y"], opset=18), tmp_path)


def test_relu6_bounds_given_as_inputs_are_literals_in_the_conv_kernel(tmp_path: Path):
    """nn.ReLU6 exports Clip(x, min, max) with the bounds as one-element initializers (opset >= 11):
    they become literals of the fused Conv+Clip kernel, which reads only the image and the weights."""
    rng = np.random.default_rng(0)
    weights = {"w": (rng.standard_normal((16, 1, 3, 3)) * 0.5).astype(np.float32),
               "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=16, kernel_shape=[3, 3], strides=[2, 2],
                              pads=[0, 0, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    r = compile_model(exported(nodes, {"x": [1, 16, 12, 12]}, ["y"], weights, opset=18), "cpu", {"measure": False},
                      output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation
    assert r.plan is not None and [len(k.args) for k in r.plan.kernels] == [3]  # out, x, w


def test_conv1d_gemm_viewed_before_its_tanh_gelu_is_one_gemm_kernel(tmp_path: Path):
    """GPT-2's Conv1D then NewGELU: addmm on [tokens, features], viewed back as [1, tokens,
    features], then 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): the GELU is the
    packed GEMM's epilogue, read through the view."""
    rng = np.random.default_rng(0)
    k, n = 64, 96
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["x2"]),
             helper.make_node("Gemm", ["x2", "w", "b"], ["h0"]), helper.make_node("Reshape", ["h0", "shape"], ["h"]),
             helper.make_node("Pow", ["h", "three"], ["p"]), helper.make_node("Mul", ["p", "k1"], ["q"]),
             helper.make_node("Add", ["h", "q"], ["r"]), helper.make_node("Mul", ["r", "k2"], ["s"]),
             helper.make_node("Tanh", ["s"], ["t"]), helper.make_node("Add", ["t", "one"], ["u"]),
             helper.make_node("Mul", ["h", "half"], ["v"]), helper.make_node("Mul", ["v", "u"], ["y"])]
    scalars = {"three": 3.0, "k1": 0.044715, "k2": 0.7978845608, "one": 1.0, "half": 0.5}
    weights = {"w": rng.standard_normal((k, n)).astype(np.float32) / 8, "b": rng.standard_normal(n).astype(np.float32),
               "flat": np.array([-1, k], np.int64), "shape": np.array([1, 24, n], np.int64),
               **{name: np.array(v, np.float32) for name, v in scalars.items()}}
    r = compile_model(exported(nodes, {"x": [1, 24, k]}, ["y"], weights), "cpu", {"measure": False},
                      output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation
    (kernel,) = r.kernels
    assert kernel["tile"]["gemm"] is not None and kernel["op_pattern"].startswith("Gemm+Pow")
