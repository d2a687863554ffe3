"""Bad models are refused before any heavy work, with a message naming the problem."""

import numpy as np
import pytest
from frontend_kit import make_model
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ModelError, UnsupportedOpError
from compiler.frontend import Limits, import_model, inspect_model


def relu_model(shape=(2, 3), name="x"):
    return make_model([helper.make_node("Relu", [name], ["y"])], {name: np.zeros(shape, np.float32)}, ["y"])


def both(model, limits=None, **kw):
    """Both entry points must refuse the same way."""
    data = model if isinstance(model, bytes) else model.SerializeToString()
    with pytest.raises(ModelError) as a:
        inspect_model(data, limits)
    with pytest.raises(ModelError) as b:
        import_model(data, limits=limits, **kw)
    assert type(a.value) is type(b.value)
    return str(a.value)


@pytest.mark.parametrize("data", [b"", b"hello, this is not a model", bytes(range(256)) * 4])
def test_not_onnx_bytes(data):
    assert "not an ONNX model" in both(data)


def test_truncated_model():
    data = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": np.zeros((2, 3), np.float32)}, ["y"],
                      {"w": np.ones(64, np.float32)}).SerializeToString()
    assert "not an ONNX model" in both(data[: len(data) - 40])


def test_model_over_size_cap():
    assert "larger than the limit" in both(relu_model(), Limits(max_model_bytes=20))


def test_external_data_is_refused():
    model = relu_model()
    t = numpy_helper.from_array(np.ones(4, np.float32), "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="/etc/passwd")
    model.graph.initializer.append(t)
    assert "external data" in both(model)


def test_cycle_is_refused():
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second")],
        "cyc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    msg = both(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert "cycle" in msg


def test_rank_over_limit():
    assert "rank 9 exceeds" in both(relu_model((1,) * 9))


def test_input_over_element_limit():
    assert "elements exceeds" in both(relu_model((1 << 15, 1 << 15)))


def test_initializer_over_element_limit_is_refused_from_its_dims():
    model = relu_model()
    t = TensorProto(name="huge", data_type=TensorProto.FLOAT, dims=[1 << 30])  # no payload needed
    model.graph.initializer.append(t)
    assert "elements exceeds" in both(model)


def test_inferred_value_over_element_limit():
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       {"a": np.zeros((40, 1), np.float32), "b": np.zeros((1, 40), np.float32)}, ["y"])
    assert "elements exceeds" in both(model, Limits(max_tensor_elements=1000))


def test_total_weights_over_cap():
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], {"x": np.zeros(64, np.float32)}, ["y"],
                       {"w": np.ones(64, np.float32)})
    assert "weights take 256 bytes" in both(model, Limits(max_weight_bytes=100))


def test_missing_input_names_node_and_value():
    model = make_model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="adder")],
                       {"x": np.zeros(2, np.float32)}, ["y"])
    msg = both(model)
    assert "'adder'" in msg and "'nowhere'" in msg


@pytest.mark.parametrize("op,domain", [("FancyOp", ""), ("Relu", "com.example")])
def test_unknown_op_names_type_and_node(op, domain):
    node = helper.make_node(op, ["x"], ["y"], name="n1", domain=domain)
    model = make_model([node], {"x": np.zeros(2, np.float32)}, ["y"])
    if domain:
        model.opset_import.append(helper.make_opsetid(domain, 1))
    with pytest.raises(UnsupportedOpError) as e:
        inspect_model(model.SerializeToString())
    assert e.value.op == op and e.value.node == "n1"
    with pytest.raises(UnsupportedOpError):
        import_model(model)


def test_data_dependent_output_shapes_are_named_as_such():
    """torch's x[x > 0] exports NonZero, whose output length is the number of true elements."""
    model = make_model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], {"x": np.ones((2, 3), np.float32)},
                       ["y"])
    assert "output shape depends on the input values" in both(model)


def test_unsupported_element_type():
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "s",
                              [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ModelError, match="string"):
        import_model(model)


def test_unbound_symbolic_dim_names_input_and_dim():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "sym",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ModelError) as e:
        import_model(model)
    assert "'x'" in str(e.value) and "'batch'" in str(e.value)
    g = import_model(model, input_shapes={"x": [5, 3]})
    assert g.tensors[g.inputs[0]].shape == (5, 3)
    with pytest.raises(ModelError, match="dim 1 is 3"):
        import_model(model, input_shapes={"x": [5, 4]})
    with pytest.raises(ModelError, match="not an input"):
        import_model(model, input_shapes={"z": [1]})


def test_symbolic_dim_shared_between_inputs_binds_once():
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "sym",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 3]),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    g = import_model(model, input_shapes={"a": [4, 3]})
    assert [g.tensors[t].shape for t in g.inputs] == [(4, 3), (4, 3)]
    with pytest.raises(ModelError, match="bound to both"):
        import_model(model, input_shapes={"a": [4, 3], "b": [2, 3]})


def test_data_dependent_shape_is_unsupported():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                       {"x": np.zeros(6, np.float32), "s": np.array([2, 3], np.int64)}, ["y"])
    with pytest.raises(UnsupportedOpError, match="data-dependent shape"):
        import_model(model)


def test_opset_out_of_range():
    model = relu_model()
    model.opset_import[0].version = 5
    assert "opset 5" in both(model)


def test_unknown_op_inside_a_branch_is_refused_up_front():
    branch = helper.make_graph([helper.make_node("FancyOp", ["x"], ["t"], name="deep")], "b", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    model = make_model([node], {"x": np.zeros(2, np.float32), "c": np.array(True)}, ["y"])
    with pytest.raises(UnsupportedOpError) as e:
        inspect_model(model.SerializeToString())
    assert e.value.op == "FancyOp" and e.value.node == "deep"


def test_loop_unrolling_is_bounded():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Neg", ["v_in"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", 9, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("c_out", 9, []), helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2])])
    node = helper.make_node("Loop", ["n", "", "v"], ["y"], body=body)
    def model(steps):
        return make_model([node], {"v": np.zeros(2, np.float32)}, ["y"], {"n": np.array(steps, np.int64)}, opset=13)

    with pytest.raises(ModelError, match="exceed the limit"):
        import_model(model(10**9))
    with pytest.raises(ModelError, match="exceeds 5 kernels"):
        import_model(model(20), limits=Limits(max_kernels=5))


@pytest.mark.parametrize(("op", "indices", "bad"), [("Gather", [0, 7], 7), ("Gather", [-4, 1], -4),
                                                    ("GatherElements", [[0, 3]], 3)])
def test_constant_indices_out_of_range_are_refused_by_name(op, indices, bad):
    x = np.zeros((3, 2), np.float32)
    model = make_model([helper.make_node(op, ["x", "i"], ["y"], axis=0)], {"x": x}, ["y"],
                       {"i": np.array(indices, np.int64)})
    with pytest.raises(ModelError, match=f"{op} .*index {bad} is out of range for axis 0 of extent 3"):
        import_model(model.SerializeToString())
