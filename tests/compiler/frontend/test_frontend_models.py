"""Small whole models (a CNN and a transformer block) with a symbolic batch, against onnxruntime."""

import numpy as np
from frontend_kit import assert_matches, run_ort
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import import_model
from compiler.ir.graph_interp import run_graph


def _init(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def cnn():
    rng = np.random.default_rng(0)
    inits = [_init(rng, "w1", (8, 3, 3, 3)), _init(rng, "b1", (8,)),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "g"),
             _init(rng, "beta", (8,)), _init(rng, "mu", (8,)),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "var"),
             _init(rng, "w2", (8, 1, 3, 3)), _init(rng, "fc", (10, 8)), _init(rng, "fcb", (10,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mu", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["c2"], ["h"]),
        helper.make_node("Add", ["h", "p1"], ["res"]),
        helper.make_node("GlobalAveragePool", ["res"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], axis=1),
    ]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def transformer_block(d=16, heads=2):
    rng = np.random.default_rng(1)
    inits = [_init(rng, n, (d, d)) for n in ("wq", "wk", "wv", "wo")]
    inits += [_init(rng, "w_up", (d, 4 * d)), _init(rng, "w_down", (4 * d, d)),
              numpy_helper.from_array(np.ones(d, np.float32), "ln_s"), _init(rng, "ln_b", (d,)),
              numpy_helper.from_array(np.array([0, 0, heads, d // heads], np.int64), "split_heads"),
              numpy_helper.from_array(np.array([0, 0, d], np.int64), "merge"),
              numpy_helper.from_array(np.array(1 / np.sqrt(d // heads), np.float32), "scale")]
    nodes = [helper.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["n"], axis=-1)]
    for p in ("q", "k", "v"):
        nodes += [helper.make_node("MatMul", ["n", f"w{p}"], [f"{p}0"]),
                  helper.make_node("Reshape", [f"{p}0", "split_heads"], [f"{p}1"]),
                  helper.make_node("Transpose", [f"{p}1"], [p], perm=[0, 2, 1, 3] if p != "k" else [0, 2, 3, 1])]
    nodes += [
        helper.make_node("MatMul", ["q", "k"], ["s0"]), helper.make_node("Mul", ["s0", "scale"], ["s"]),
        helper.make_node("Softmax", ["s"], ["a"], axis=-1), helper.make_node("MatMul", ["a", "v"], ["o0"]),
        helper.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["o1", "merge"], ["o2"]), helper.make_node("MatMul", ["o2", "wo"], ["o"]),
        helper.make_node("Add", ["x", "o"], ["h"]),
        helper.make_node("MatMul", ["h", "w_up"], ["u"]), helper.make_node("Gelu", ["u"], ["g"]),
        helper.make_node("MatMul", ["g", "w_down"], ["dn"]), helper.make_node("Add", ["h", "dn"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", d])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


def test_cnn_with_symbolic_batch():
    model = cnn()
    x = np.random.default_rng(2).standard_normal((2, 3, 16, 16)).astype(np.float32)
    g = import_model(model.SerializeToString(), input_shapes={"x": [2, 3, 16, 16]})
    assert [n.op for n in g.nodes].count("BatchNormalization") == 0  # folded into the first Conv
    assert_matches(run_graph(g, {"x": x})["y"], run_ort(model, {"x": x})["y"])


def test_transformer_block():
    model = transformer_block()
    x = np.random.default_rng(3).standard_normal((2, 5, 16)).astype(np.float32)
    g = import_model(model, input_shapes={"x": [2, 5, 16]})
    assert_matches(run_graph(g, {"x": x})["y"], run_ort(model, {"x": x})["y"])


def test_opset_7_model():
    rng = np.random.default_rng(4)
    inits = [_init(rng, "w", (4, 3, 3, 3)), numpy_helper.from_array(np.ones(4, np.float32), "s"),
             _init(rng, "b", (4,)), _init(rng, "m", (4,)), numpy_helper.from_array(np.full(4, 2.0, np.float32), "v"),
             _init(rng, "fc", (4 * 4 * 4, 5)), _init(rng, "fcb", (5,))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], spatial=1),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["g"]),
             helper.make_node("Softmax", ["g"], ["y"])]
    # IR version 3: initializers are listed as graph inputs too; they stay weights
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])]
    inputs += [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "old", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)], ir_version=3)
    x = np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32)
    g = import_model(model)
    assert [g.tensors[t].name for t in g.inputs] == ["x"]
    assert_matches(run_graph(g, {"x": x})["y"], run_ort(model, {"x": x})["y"])
