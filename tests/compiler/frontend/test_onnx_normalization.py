"""Softmax family and normalizations against onnxruntime."""

import numpy as np
import pytest
from frontend_kit import check_op, make_model, random
from onnx import helper

from compiler.frontend import import_model


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_both_semantics(op, axis, opset):
    check_op(op, {"x": random((3, 4, 5), low=-10, high=10)}, opset=opset, axis=axis)


def test_softmax_is_max_exp_sum_scale():
    """The exponentials are computed once (one element-wise pass), summed into one
    reciprocal per row, then scaled by it: no division per element."""
    model = make_model([helper.make_node("Softmax", ["x"], ["y"])], {"x": random((2, 8))}, ["y"])
    nodes = import_model(model).nodes
    assert [n.compute.reduce_op for n in nodes] == ["max", None, "sum", None]
    assert sum(repr(n.compute.body).count("exp") for n in nodes) == 1
    assert "'div'" in repr(nodes[2].compute.post) and "'div'" not in repr(nodes[3].compute.body)


@pytest.mark.parametrize("axis", [-1, 1, 0])
@pytest.mark.parametrize("outputs", [1, 3])
def test_layer_normalization(axis, outputs):
    x = random((2, 3, 4), low=-5, high=5)
    shape = x.shape[axis:]
    check_op("LayerNormalization", {"x": x}, {"scale": random(shape, seed=1), "bias": random(shape, seed=2)},
             outputs=outputs, opset=17, axis=axis, epsilon=1e-3)


def test_layer_normalization_without_bias():
    check_op("LayerNormalization", {"x": random((4, 6))}, {"scale": random((6,), seed=1)}, opset=17)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3)])
def test_batch_normalization_alone(shape):
    c = shape[1]
    weights = {"s": random((c,), seed=1), "b": random((c,), seed=2), "m": random((c,), seed=3),
               "v": random((c,), seed=4, low=0.1, high=2)}
    check_op("BatchNormalization", {"x": random(shape)}, weights, epsilon=1e-4)


def test_batch_normalization_with_runtime_statistics():
    c = 3
    feeds = {"x": random((2, c, 4, 4)), "s": random((c,), seed=1), "b": random((c,), seed=2),
             "m": random((c,), seed=3), "v": random((c,), seed=4, low=0.1, high=2)}
    check_op("BatchNormalization", feeds)


def test_instance_normalization():
    check_op("InstanceNormalization", {"x": random((2, 3, 5, 4))},
             {"s": random((3,), seed=1), "b": random((3,), seed=2)}, epsilon=1e-3)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(p):
    check_op("LpNormalization", {"x": random((3, 4))}, axis=-1, p=p)


def test_dropout_is_identity_with_an_all_true_mask():
    check_op("Dropout", {"x": random((3, 4))}, outputs=2)
    check_op("Dropout", {"x": random((3, 4))}, {"ratio": np.array(0.5, np.float32)}, opset=13)


@pytest.mark.parametrize("outputs", [1, 3])
def test_half_layer_normalization_computes_its_statistics_in_float32(outputs):
    """stash_type (default float32) is the statistics' precision and the dtype of Mean and InvStdDev."""
    x = random((2, 3, 64), np.float16, low=-5, high=5)
    check_op("LayerNormalization", {"x": x}, {"scale": random((64,), np.float16, seed=1),
                                              "bias": random((64,), np.float16, seed=2)},
             outputs=outputs, opset=17, rel_l2=1e-3)
    nodes = import_model(make_model([helper.make_node("LayerNormalization", ["x", "s"], ["y", "m"])],
                                    {"x": x, "s": x[0, 0]}, ["y", "m"], opset=17)).nodes
    assert [n.compute.dtype for n in nodes] == ["float32", "float32", "float16"]


def test_half_group_normalization_stashes_in_float32():
    """Opset 21's stash_type (default float32): the statistics' precision (opset 18's
    GroupNormalization, which computed in the input's type, is deprecated)."""
    x = random((2, 6, 3, 3), np.float16)
    weights = {"s": random((6,), np.float16, seed=1), "b": random((6,), np.float16, seed=2)}
    check_op("GroupNormalization", {"x": x}, weights, opset=21, num_groups=3, rel_l2=1e-3)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)
    nodes = import_model(make_model([node], {"x": x}, ["y"], weights, opset=21)).nodes
    assert [n.compute.dtype for n in nodes] == ["float32", "float32", "float16"]
