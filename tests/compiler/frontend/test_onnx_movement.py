"""Data movement lowerings against onnxruntime; reshapes are views, not kernels."""

import numpy as np
import pytest
from frontend_kit import check_model, check_op, make_model, random
from onnx import helper

from compiler.frontend import import_model
from compiler.frontend.ops.movement import CONCAT_FAN_IN


def i64(*v):
    return np.array(v, np.int64)


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1]])
def test_transpose(perm):
    attrs = {} if perm is None else {"perm": perm}
    check_op("Transpose", {"x": random((2, 3, 4))}, **attrs)


@pytest.mark.parametrize("shape,allowzero", [((4, -1), 0), ((0, 3, -1), 0), ((-1,), 0), ((2, 3, 4), 1)])
def test_reshape(shape, allowzero):
    check_op("Reshape", {"x": random((2, 3, 4))}, {"s": i64(*shape)}, allowzero=allowzero)


def test_view_ops_make_no_kernels():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["a"]), helper.make_node("Flatten", ["a"], ["b"], axis=1),
             helper.make_node("Unsqueeze", ["b", "ax"], ["c"]), helper.make_node("Squeeze", ["c", "ax"], ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    model = make_model(nodes, {"x": random((2, 3, 4))}, ["y"], {"s": i64(6, 4), "ax": i64(0)})
    g = import_model(model)
    assert [n.op for n in g.nodes] == ["Relu"]
    assert g.storage_of(g.nodes[0].inputs[0]) == g.inputs[0]


@pytest.mark.parametrize("shape,perm", [((5, 1, 3), [1, 0, 2]), ((5, 1, 3, 1), [0, 3, 2, 1]),
                                        ((5, 1, 3, 1), [3, 0, 1, 2])])
def test_transpose_moving_only_unit_axes_is_a_view(shape, perm):
    model = make_model([helper.make_node("Transpose", ["x"], ["t"], perm=perm), helper.make_node("Relu", ["t"], ["y"])],
                       {"x": random(shape)}, ["y"])
    g = import_model(model)
    assert [n.op for n in g.nodes] == ["Relu"]
    check_op("Transpose", {"x": random(shape)}, perm=perm)


def test_transpose_moving_a_real_axis_past_a_unit_one_is_a_copy():
    check_op("Transpose", {"x": random((5, 1, 3))}, perm=[2, 1, 0])
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], perm=[2, 1, 0])], {"x": random((5, 1, 3))}, ["y"])
    assert [n.op for n in import_model(model).nodes] == ["Transpose"]


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(axis):
    check_op("Flatten", {"x": random((2, 3, 4))}, axis=axis)


def test_squeeze_unsqueeze_forms():
    check_op("Squeeze", {"x": random((1, 3, 1, 2))})
    check_op("Squeeze", {"x": random((1, 3, 1, 2))}, {"axes": i64(-2)})
    check_op("Squeeze", {"x": random((1, 3, 1, 2))}, opset=11, axes=[0])
    check_op("Unsqueeze", {"x": random((3, 2))}, {"axes": i64(0, -1)})
    check_op("Unsqueeze", {"x": random((3, 2))}, opset=11, axes=[1])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    shapes[1][axis] = 1
    shapes[2][axis] = 5
    check_op("Concat", {f"x{k}": random(s, seed=k) for k, s in enumerate(shapes)}, axis=axis)


def test_long_concat_is_a_tree_of_short_ones():
    """17 parts of uneven lengths: kernels of at most CONCAT_FAN_IN parts, equal to onnxruntime."""
    feeds = {f"x{k}": random((2, 1 + k % 3, 4), seed=k) for k in range(17)}
    check_op("Concat", feeds, axis=1)
    model = make_model([helper.make_node("Concat", list(feeds), ["y"], axis=1)], feeds, ["y"])
    nodes = import_model(model).nodes
    assert len(nodes) == 3  # 8 parts, 8 parts, then their two results and the 17th
    assert max(len(n.inputs) for n in nodes) <= CONCAT_FAN_IN


def test_split_forms():
    x = random((6, 4))
    check_op("Split", {"x": x}, outputs=3, opset=13)
    check_op("Split", {"x": x}, {"split": i64(1, 2, 3)}, outputs=3, opset=13)
    check_op("Split", {"x": x}, outputs=2, opset=11, axis=1, split=[3, 1])
    check_op("Split", {"x": random((7, 2))}, outputs=3, opset=18, num_outputs=3)


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ((1, 0), (3, 10), (0, 1), (1, 2)), ((-1,), (-100,), (1,), (-1,)), ((0,), (1000,), None, None),
    ((2, -3), (-1, 100), (-1, 0), (1, 1)), ((5,), (0,), (1,), (-2,)),
])
def test_slice(starts, ends, axes, steps):
    w = {"starts": i64(*starts), "ends": i64(*ends)}
    order = ["x", "starts", "ends"]
    if axes is not None:
        w["axes"] = i64(*axes)
        order.append("axes")
    if steps is not None:
        w["steps"] = i64(*steps)
        order.append("steps")
    check_op("Slice", {"x": random((4, 6))}, w, input_order=order)


def test_slice_opset9_attributes():
    check_op("Slice", {"x": random((4, 6))}, opset=9, starts=[1, -4], ends=[3, 100], axes=[0, 1])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis):
    check_op("Gather", {"x": random((3, 4, 5))}, {"i": np.array([[0, -1], [2, 1]], np.int64)}, axis=axis)


def test_gather_runtime_indices_and_scalar_index():
    check_op("Gather", {"x": random((5, 3)), "i": np.array([4, 0, -2], np.int32)})
    check_op("Gather", {"x": random((5, 3))}, {"i": np.array(-1, np.int64)}, axis=0)


def test_gather_elements():
    check_op("GatherElements", {"x": random((3, 4))}, {"i": np.array([[0, -1, 2], [1, 0, 3]], np.int64)}, axis=1)


@pytest.mark.parametrize("x,shape", [((3, 1), (2, 3, 4)), ((1, 4), (3, 1)), ((2,), (2,))])
def test_expand(x, shape):
    check_op("Expand", {"x": random(x)}, {"s": i64(*shape)})


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_modes(mode):
    check_op("Pad", {"x": random((3, 4))}, {"p": i64(1, 2, 2, 1)}, mode=mode)


def test_pad_value_axes_negative_and_old_form():
    check_op("Pad", {"x": random((2, 3, 4))}, {"p": i64(1, 2, 0, 3), "v": np.array(1.5, np.float32),
                                               "ax": i64(0, -1)})
    check_op("Pad", {"x": random((3, 4))}, {"p": i64(-1, 1, 0, -2)})
    check_op("Pad", {"x": random((3, 4))}, opset=10, pads=[0, 1, 1, 0], value=2.0)


def test_tile():
    check_op("Tile", {"x": random((2, 3))}, {"r": i64(2, 3)})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    check_op("DepthToSpace", {"x": random((1, 8, 2, 3))}, blocksize=2, mode=mode)


def test_space_to_depth():
    check_op("SpaceToDepth", {"x": random((1, 2, 4, 6))}, blocksize=2)


def test_constant_forms_and_shape_ops():
    nodes = [helper.make_node("Constant", [], ["a"], value_floats=[1.0, 2.0]),
             helper.make_node("Constant", [], ["b"], value_int=3),
             helper.make_node("Shape", ["x"], ["s"], start=1),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", 1, [1], [0.5])),
             helper.make_node("Range", ["r0", "r1", "r2"], ["r"]),
             helper.make_node("Size", ["x"], ["n"])]
    x = random((2, 3, 4))
    model = make_model(nodes, {"x": x}, ["a", "b", "c", "r", "n"],
                       {"r0": np.array(1, np.int64), "r1": np.array(9, np.int64), "r2": np.array(3, np.int64)})
    check_model(model, {"x": x})
