"""The Graph contract the planner relies on, names as metadata only, folding and inspect_model."""

import numpy as np
import pytest
from frontend_kit import check_model, make_model, random
from onnx import TensorProto, helper

from compiler.frontend import SUPPORTED_OPS, import_model, inspect_model
from compiler.ir.graph import Graph, TensorKind
from compiler.ir.graph_interp import run_graph


def assert_contract(g: Graph) -> None:
    producer = g.producer()
    storages = [g.storage_of(t) for t in g.outputs]
    assert len(set(storages)) == len(storages), "two outputs share storage"
    for s in storages:
        assert s in producer, "an output's storage is not produced by a node"
        assert g.tensors[s].kind == TensorKind.INTERMEDIATE
    for t in g.inputs:
        assert g.tensors[t].kind == TensorKind.INPUT
    used = {g.storage_of(i) for n in g.nodes for i in n.inputs}
    for w in g.weights():
        assert w.id in used, "an unused weight was kept"
    for k, n in enumerate(g.nodes):
        assert n.id == k
        assert n.compute.label == n.op
        assert len(set(n.inputs)) == len(n.inputs), "a node reads one tensor through two inputs"


def test_output_that_is_an_input_or_constant_gets_a_copy():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [helper.make_node("Identity", ["x"], ["same"]),
             helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [2], [1, 2])),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Identity", ["r"], ["r2"])]
    model = make_model(nodes, {"x": x}, ["same", "c", "r", "r2"])
    g = import_model(model)
    assert_contract(g)
    assert [g.tensors[t].name for t in g.outputs] == ["same", "c", "r", "r2"]
    out = run_graph(g, {"x": x})
    np.testing.assert_array_equal(out["same"], x)
    np.testing.assert_array_equal(out["c"], [1, 2])
    np.testing.assert_array_equal(out["r2"], x)


def test_an_output_listed_twice_is_one_output():
    x = random((2, 3))
    model = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])],
                       {"x": x}, ["y", "z", "y"])
    g = import_model(model)
    assert_contract(g)
    assert [g.tensors[t].name for t in g.outputs] == ["y", "z"]


def test_unused_weights_and_dead_nodes_are_dropped():
    nodes = [helper.make_node("Add", ["x", "w"], ["y"]), helper.make_node("Mul", ["x", "unused_w"], ["dead"])]
    model = make_model(nodes, {"x": np.zeros(4, np.float32)}, ["y"],
                       {"w": np.ones(4, np.float32), "unused_w": np.ones(4, np.float32)})
    g = import_model(model)
    assert_contract(g)
    assert [n.op for n in g.nodes] == ["Add"]
    assert [w.name for w in g.weights()] == ["w"]


def test_a_value_a_node_reads_twice_is_one_input():
    # how exporters write a variance: Mul(d, d) of an intermediate d; Where(c, d, d) and Concat too
    nodes = [helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Mul", ["d", "d"], ["sq"]),
             helper.make_node("Greater", ["x", "m"], ["c"]), helper.make_node("Where", ["c", "sq", "sq"], ["w"]),
             helper.make_node("Concat", ["w", "d", "w"], ["y"], axis=1)]
    feeds = {"x": random((2, 3)), "m": random((2, 1), seed=1)}
    model = make_model(nodes, feeds, ["y"])
    g = import_model(model)
    assert_contract(g)
    assert [len(n.inputs) for n in g.nodes] == [2, 1, 2, 2, 2]
    check_model(model, feeds)


def test_shape_arithmetic_folds_to_a_view():
    # y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])): the shape is known at compile time.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["zero"], value_int=0),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Relu", ["flat"], ["y"])]
    x = random((2, 3, 4))
    model = make_model(nodes, {"x": x}, ["y"], {"axes": np.array([0], np.int64),
                                                "minus_one": np.array([-1], np.int64)})
    g = import_model(model)
    assert_contract(g)
    assert [n.op for n in g.nodes] == ["Relu"]
    assert not list(g.weights())
    check_model(model, {"x": x})


def test_batchnorm_folds_into_conv():
    rng = np.random.default_rng(1)
    w = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32),
         "s": rng.uniform(0.5, 2, 4).astype(np.float32), "beta": rng.standard_normal(4).astype(np.float32),
         "mean": rng.standard_normal(4).astype(np.float32), "var": rng.uniform(0.5, 2, 4).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "beta", "mean", "var"], ["y"], epsilon=1e-3)]
    x = random((1, 3, 6, 6))
    model = make_model(nodes, {"x": x}, ["y"], w)
    g = import_model(model)
    assert [n.op for n in g.nodes] == ["Conv"]
    assert_contract(g)
    check_model(model, {"x": x})


def test_batchnorm_stays_when_conv_output_is_also_used():
    rng = np.random.default_rng(2)
    w = {"w": rng.standard_normal((2, 2, 1, 1)).astype(np.float32), "s": np.ones(2, np.float32),
         "beta": np.zeros(2, np.float32), "mean": np.full(2, 0.5, np.float32), "var": np.full(2, 2.0, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "s", "beta", "mean", "var"], ["y"]),
             helper.make_node("Relu", ["c"], ["z"])]
    x = random((1, 2, 3, 3))
    model = make_model(nodes, {"x": x}, ["y", "z"], w)
    g = import_model(model)
    assert [n.op for n in g.nodes] == ["Conv", "BatchNormalization", "Relu"]
    check_model(model, {"x": x})


INJECTION = ['*/ system("rm -rf /"); /*', 'a"b\'c', "line\nbreak\r\n", "x" * 10_000, "${HOME} `id` $(id)", "\\"]


def test_hostile_names_are_only_metadata():
    names = [f"{s}#{k}" for k, s in enumerate(INJECTION)]
    x, w = random((2, 3)), np.ones((3,), np.float32)
    nodes = [helper.make_node("Add", [names[0], names[1]], [names[2]], name=names[3]),
             helper.make_node("Relu", [names[2]], [names[4]], name=names[5])]
    model = make_model(nodes, {names[0]: x}, [names[4]], {names[1]: w})
    model.graph.name = names[3]
    model.graph.doc_string = names[0]
    g = import_model(model.SerializeToString())
    assert g.tensors[g.inputs[0]].name == names[0]
    assert g.tensors[g.outputs[0]].name == names[4]
    for n in g.nodes:
        assert not any(s in n.compute.canonical() for s in INJECTION)
    np.testing.assert_allclose(run_graph(g, {names[0]: x})[names[4]], np.maximum(x + w, 0))
    info = inspect_model(model.SerializeToString())
    assert info.inputs[0]["name"] == names[0]


def test_equal_ops_give_equal_canonical_te_whatever_the_weights():
    def build(seed):
        w = np.random.default_rng(seed).standard_normal((8, 4)).astype(np.float32)
        return make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name=f"n{seed}")],
                          {"x": np.zeros((2, 8), np.float32)}, ["y"], {"w": w})

    a, b = import_model(build(0)), import_model(build(1))
    assert a.nodes[0].compute.canonical() == b.nodes[0].compute.canonical()


def test_inspect_model_summarizes():
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor("w", TensorProto.FLOAT, [8, 4], np.zeros(32, np.float32))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="unit")
    info = inspect_model(model.SerializeToString())
    assert info.inputs == [{"name": "x", "shape": ["batch", 8], "dtype": "float32"}]
    assert info.outputs == [{"name": "y", "shape": ["batch", 4], "dtype": "float32"}]
    assert info.op_histogram == {"MatMul": 1, "Relu": 1}
    assert info.parameters == 32 and info.opset == 17 and info.producer == "unit"


def test_supported_ops_cover_the_required_set():
    required = {"MatMul", "Gemm", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                "BatchNormalization", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu", "HardSigmoid",
                "HardSwish", "Exp", "Log", "Sqrt", "Reciprocal", "Pow", "Neg", "Abs", "Clip", "Min", "Max", "Sum",
                "Mean", "Add", "Sub", "Mul", "Div", "Where", "Equal", "Less", "Greater", "LessOrEqual",
                "GreaterOrEqual", "Not", "And", "Or", "Softmax", "LogSoftmax", "LayerNormalization", "ReduceMean",
                "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare",
                "ReduceLogSumExp", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split",
                "Slice", "Gather", "Expand", "Cast", "Pad", "Constant", "Shape", "Size", "ConstantOfShape",
                "Range", "Dropout", "Identity"}
    assert required <= SUPPORTED_OPS


@pytest.mark.parametrize("source", ["bytes", "path", "proto"])
def test_import_accepts_bytes_paths_and_protos(source, tmp_path):
    x = random((2, 3))
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"])
    arg = {"bytes": model.SerializeToString(), "proto": model}.get(source)
    if arg is None:
        arg = tmp_path / "m.onnx"
        arg.write_bytes(model.SerializeToString())
    np.testing.assert_array_equal(run_graph(import_model(arg), {"x": x})["y"], np.maximum(x, 0))


def _gated_conv(size: int, cin: int, cout: int, gate_first: bool = False, batch: int = 1, group: int = 1,
                gate_batch: int = 1) -> tuple:
    """x -> Conv(x * sigmoid(s)) with a (gate_batch, cin, 1, 1) gate s (a squeeze-excitation's
    channel scale), and its feeds."""
    rng = np.random.default_rng(3)
    w = {"w": (rng.standard_normal((cout, cin // group, 1, 1)) / np.sqrt(cin)).astype(np.float32),
         "b": rng.standard_normal(cout).astype(np.float32)}
    mul = ["g", "x"] if gate_first else ["x", "g"]
    nodes = [helper.make_node("Sigmoid", ["s"], ["g"]), helper.make_node("Mul", mul, ["m"]),
             helper.make_node("Conv", ["m", "w", "b"], ["y"], group=group)]
    feeds = {"x": random((batch, cin, size, size)), "s": random((gate_batch, cin, 1, 1))}
    return make_model(nodes, feeds, ["y"], w), feeds


@pytest.mark.parametrize("gate_first", [False, True])
def test_a_channel_scale_is_folded_into_the_conv_weights(gate_first):
    """Conv(x * s) with s per channel runs as Conv(x, w * s): the Mul multiplies the weights
    (8 x 32 values), not the map (32 x 32 x 32), and the result matches onnxruntime's."""
    model, feeds = _gated_conv(32, 32, 8, gate_first, batch=2)
    g = import_model(model)
    assert [n.op for n in g.nodes] == ["Sigmoid", "Mul", "Conv"]
    assert g.nodes[1].compute.shape == (8, 32, 1, 1)
    assert_contract(g)
    check_model(model, feeds)


@pytest.mark.parametrize("why", ["weights large beside the map", "gate per batch index", "grouped"])
def test_a_channel_scale_stays_on_the_map_where_folding_does_not_pay_or_hold(why):
    """Folded, a gate would scale weights too large beside the map (40 x 240 against 240 x
    28 x 28: 1/20), differ per batch index, or mix with the groups' channels: the Mul stays
    on the map."""
    args = {"weights large beside the map": dict(size=28, cin=240, cout=40),
            "gate per batch index": dict(size=32, cin=32, cout=8, batch=2, gate_batch=2),
            "grouped": dict(size=32, cin=32, cout=8, group=2)}[why]
    model, feeds = _gated_conv(**args)
    g = import_model(model)
    assert [n.op for n in g.nodes] == ["Sigmoid", "Mul", "Conv"]
    assert g.nodes[1].compute.shape == feeds["x"].shape
    check_model(model, feeds)


def test_a_channel_scale_stays_on_the_map_before_a_padded_convolution():
    """A 3x3 convolution with padding reads zeros past the map's edge: scaled weights would
    multiply an infinite gate into them (NaN) where the scaled map had padded 0; the Mul stays."""
    rng = np.random.default_rng(4)
    w = {"w": (rng.standard_normal((4, 32, 3, 3)) / 17).astype(np.float32)}
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Conv", ["m", "w"], ["y"], pads=[1, 1, 1, 1])]
    feeds = {"x": random((1, 32, 64, 64)), "s": random((1, 32, 1, 1))}
    model = make_model(nodes, feeds, ["y"], w)
    g = import_model(model)
    assert [n.op for n in g.nodes] == ["Mul", "Conv"] and g.nodes[0].compute.shape == (1, 32, 64, 64)
    check_model(model, feeds)
