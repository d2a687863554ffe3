"""Register-level connection: fewer kernels, identical results."""

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import import_model
from compiler.ir.graph import Graph, TensorKind
from compiler.ir.graph_interp import run_graph
from compiler.ir.te import Axis, Compute, Load, TensorType, Var, call
from compiler.schedule.tilegraph.groups import lowered_copy
from compiler.schedule.tilegraph.registers import fuse


def model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def fused_and_checked(m: onnx.ModelProto):
    return graph_fused_and_checked(import_model(m.SerializeToString()))


def graph_fused_and_checked(graph: Graph) -> Graph:
    rng = np.random.default_rng(0)
    feeds = {graph.tensors[t].name: rng.standard_normal(graph.tensors[t].shape).astype(np.float32)
             for t in graph.inputs}
    before = run_graph(copy.deepcopy(graph), feeds)
    fuse(graph)
    after = run_graph(graph, feeds)
    for name, ref in before.items():
        np.testing.assert_allclose(after[name], ref, rtol=1e-5, atol=1e-6)
    return graph


W = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32)
B = np.random.default_rng(2).standard_normal((8,)).astype(np.float32)


def test_matmul_bias_activation_become_one_kernel_with_an_epilogue():
    m = model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
               helper.make_node("Relu", ["a"], ["y"])], [("x", [4, 16])], ["y"], [("w", W), ("b", B)])
    g = fused_and_checked(m)
    assert len(g.nodes) == 1
    (node,) = g.nodes
    assert node.compute.is_reduction and node.compute.post is not None
    assert node.compute.label == "MatMul+Add+Relu"


def test_elementwise_chain_is_one_kernel():
    m = model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["m"]),
               helper.make_node("Tanh", ["m"], ["y"])], [("x", [3, 5])], ["y"])
    assert len(fused_and_checked(m).nodes) == 1


def test_value_read_twice_by_different_kernels_is_computed_once():
    m = model([helper.make_node("Exp", ["x"], ["e"]), helper.make_node("ReduceSum", ["e"], ["s"], keepdims=1),
               helper.make_node("Div", ["e", "s"], ["y"])], [("x", [3, 5])], ["y"])
    g = fused_and_checked(m)
    exp_nodes = [n for n in g.nodes if n.op == "Exp"]
    assert len(exp_nodes) == 1  # read by the sum and by the division: kept in memory


def test_conv_relu_is_an_epilogue_and_padded_reads_are_not_inlined():
    w = np.random.default_rng(3).standard_normal((4, 4, 3, 3)).astype(np.float32)
    m = model([helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c1"], ["r1"]),
               helper.make_node("Abs", ["r1"], ["a"]),
               helper.make_node("Conv", ["a", "w2"], ["y"], pads=[1, 1, 1, 1])],
              [("x", [1, 4, 6, 6])], ["y"], [("w1", w), ("w2", w)])
    g = fused_and_checked(m)
    labels = [n.compute.label for n in g.nodes]
    assert labels[0].startswith("Conv+Relu")
    assert all("Abs+Conv" not in lb for lb in labels)  # Abs not inlined through the padding


def test_producers_that_would_break_a_gemm_operand_stay_apart():
    """A Concat before a 1x1 convolution (YOLO's SPPF), a ReLU before a MatMul: inlined,
    the operand would no longer be a load, and the kernel would leave the GEMM path."""
    w = np.random.default_rng(3).standard_normal((6, 8, 1, 1)).astype(np.float32)
    m = model([helper.make_node("Concat", ["x", "z"], ["c"], axis=1),
               helper.make_node("Conv", ["c", "w"], ["y"]),
               helper.make_node("Relu", ["x2"], ["r"]),
               helper.make_node("MatMul", ["r", "w2"], ["y2"])],
              [("x", [1, 4, 5, 5]), ("z", [1, 4, 5, 5]), ("x2", [4, 16])], ["y", "y2"], [("w", w), ("w2", W)])
    labels = sorted(n.compute.label for n in fused_and_checked(m).nodes)
    assert labels == ["Concat", "Conv", "MatMul", "Relu"]


def test_graph_outputs_are_never_fused_away():
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])],
              [("x", [2, 3])], ["r", "y"])
    g = fused_and_checked(m)
    assert {g.tensors[t].name for t in g.outputs} == {"r", "y"}
    assert len(g.nodes) == 2


def test_value_read_twice_by_one_node_stays_in_memory():
    """Mul(r, r) reads Relu's output through two slots (the frontend merges them, other
    passes may not): inlining one slot would leave the other reading a tensor that is gone."""
    g = Graph()
    x = g.new_tensor((3, 5), "float32", TensorKind.INPUT, "x")
    g.inputs.append(x.id)
    ax, tt = (Axis("i0", 3), Axis("i1", 5)), TensorType((3, 5), "float32")

    def at(k: int) -> Load:
        return Load(k, (Var("i0"), Var("i1")), "float32")

    r = g.add_node("Relu", Compute(ax, call("max", at(0), 0.0), (tt,), "float32", label="Relu"), (x.id,))
    y = g.add_node("Mul", Compute(ax, at(0) * at(1), (tt, tt), "float32", label="Mul"), (r.id, r.id))
    y.name = "y"
    g.outputs.append(y.id)
    assert [n.op for n in graph_fused_and_checked(g).nodes] == ["Relu", "Mul"]


def test_value_read_as_is_and_through_a_view_by_one_node_stays_in_memory():
    """MatMul(r, Reshape(r)): inlining r would leave the view of it without storage."""
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["v"]),
               helper.make_node("MatMul", ["r", "v"], ["y"])],
              [("x", [4, 6])], ["y"], [("shape", np.array([6, 4], np.int64))])
    assert [n.op for n in fused_and_checked(m).nodes] == ["Relu", "MatMul"]


@pytest.mark.parametrize("reads, fused", [(3, True), (4, False)])
def test_a_producer_read_at_many_places_stays_in_memory(reads: int, fused: bool):
    """An Add read at `reads` offsets per element (a window sum, a transform's pass): inlined,
    every place would add again; from MIN_RECOMPUTED_READS places on it is kept apart."""
    g = Graph()
    x = g.new_tensor((3, 8), "float32", TensorKind.INPUT, "x")
    g.inputs.append(x.id)
    ax, tt = (Axis("i0", 3), Axis("i1", 8)), TensorType((3, 8), "float32")
    i0, i1 = Var("i0"), Var("i1")
    s = g.add_node("Add", Compute(ax, Load(0, (i0, i1), "float32") + Load(1, (i0, i1), "float32"), (tt, tt),
                                  "float32", label="Add"), (x.id, x.id))
    window = Load(0, (i0, i1), "float32")
    for k in range(1, reads):
        window = window + Load(0, (i0, call("min", i1 + k, 7)), "float32")
    y = g.add_node("Sum", Compute(ax, window, (tt,), "float32", label="Sum"), (s.id,))
    y.name = "y"
    g.outputs.append(y.id)
    assert [n.op for n in graph_fused_and_checked(g).nodes] == (["Add+Sum"] if fused else ["Add", "Sum"])


@pytest.mark.parametrize("x_shape, view", [([4, 16], [1, 4, 8]), ([1, 4, 16], [4, 8]), ([4, 16], [1, 4, 1, 8])])
def test_an_epilogue_read_through_a_view_of_unit_axes_connects(x_shape, view):
    """GPT-2's Conv1D: a Gemm on [tokens, features] viewed as [1, tokens, features] before its
    activation; the contraction takes the view's shape, its epilogue the activation."""
    m = model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Reshape", ["h", "shape"], ["v"]),
               helper.make_node("Add", ["v", "b"], ["a"]), helper.make_node("Tanh", ["a"], ["y"])],
              [("x", x_shape)], ["y"], [("w", W), ("b", B), ("shape", np.array(view, np.int64))])
    (node,) = fused_and_checked(m).nodes
    assert node.compute.is_reduction and node.compute.shape == tuple(view)
    assert node.compute.label == "MatMul+Add+Tanh"


@pytest.mark.parametrize("pooled", [True, False])
def test_a_grouped_convolutions_activation_is_its_epilogue_through_the_merged_channels(pooled):
    """A grouped convolution computes [groups, channels of a group] and its output is viewed
    as channels: the Relu (reading the view) becomes its epilogue in the convolution's index
    space, and the Relu's output a view of the fused kernel's, read by the pool; where the
    Relu's output is the graph's, the two stay apart."""
    w = np.random.default_rng(3).standard_normal((12, 4, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], group=3),
             helper.make_node("Relu", ["c"], ["r"])]
    if pooled:
        nodes.append(helper.make_node("GlobalAveragePool", ["r"], ["y"]))
    g = fused_and_checked(model(nodes, [("x", [1, 12, 5, 5])], ["y" if pooled else "r"], [("w", w)]))
    if not pooled:
        assert len(g.nodes) == 2
        return
    conv, pool = g.nodes
    assert conv.op == "Conv+Relu" and len(conv.compute.shape) == 5 and conv.compute.post is not None
    (read,) = pool.inputs
    assert g.tensors[read].shape == (1, 12, 5, 5) and g.storage_of(read) == conv.output


def test_fusing_through_merged_channels_leaves_the_lowered_graph_as_it_was():
    """The compile plans again from the lowered graph after splitting groups back
    (`lowered_copy`): the view the fusion makes must not change the tensors it shares."""
    w = np.random.default_rng(3).standard_normal((12, 4, 3, 3)).astype(np.float32)
    lowered = import_model(model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], group=3),
                                  helper.make_node("Relu", ["c"], ["r"]),
                                  helper.make_node("GlobalAveragePool", ["r"], ["y"])],
                                 [("x", [1, 12, 5, 5])], ["y"], [("w", w)]).SerializeToString())
    views = {t: x.view_of for t, x in lowered.tensors.items()}
    plans = [fuse(lowered_copy(lowered)) for _ in range(2)]
    assert {t: x.view_of for t, x in lowered.tensors.items()} == views
    assert [n.op for n in plans[0].nodes] == [n.op for n in plans[1].nodes] == ["Conv+Relu", "GlobalAveragePool"]


@pytest.mark.parametrize("case", ["reshaped", "read_beside_the_view", "view_is_an_output"])
def test_views_that_move_elements_or_stay_read_keep_the_contraction_apart(case):
    view = [2, 16] if case == "reshaped" else [1, 4, 8]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Reshape", ["h", "shape"], ["v"]),
             helper.make_node("Tanh", ["v"], ["y"])]
    outputs = {"reshaped": ["y"], "view_is_an_output": ["y", "v"], "read_beside_the_view": ["y", "r"]}[case]
    if case == "read_beside_the_view":  # the MatMul's output read as it is, too
        nodes.append(helper.make_node("Relu", ["h"], ["r"]))
    m = model(nodes, [("x", [4, 16])], outputs, [("w", W), ("shape", np.array(view, np.int64))])
    g = fused_and_checked(m)
    assert not any(n.compute.is_reduction and n.compute.post is not None for n in g.nodes)


def test_an_elementwise_producer_is_not_inlined_through_a_view():
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["v"]),
               helper.make_node("Tanh", ["v"], ["y"])],
              [("x", [4, 8])], ["y"], [("shape", np.array([1, 4, 8], np.int64))])
    assert [n.op for n in fused_and_checked(m).nodes] == ["Relu", "Tanh"]
