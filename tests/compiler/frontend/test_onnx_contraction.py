"""MatMul, Gemm and Conv lowerings against onnxruntime, and their single-Compute shape."""

import numpy as np
import pytest
from frontend_kit import check_op, make_model, random
from onnx import helper

from compiler.frontend import import_model
from compiler.ir.te import Call, loads_of, walk


@pytest.mark.parametrize("a,b", [((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((4,), (4, 5)), ((3, 4), (4,)),
                                 ((4,), (4,)), ((2, 3, 4), (4, 2))])
def test_matmul_shapes(a, b):
    check_op("MatMul", {"a": random(a, seed=1), "b": random(b, seed=2)})


def test_matmul_is_one_sum_reduce_compute():
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       {"a": random((2, 3, 4)), "b": random((4, 5))}, ["y"])
    (node,) = import_model(model).nodes
    c = node.compute
    assert c.reduce_op == "sum" and [a.extent for a in c.reduce_axes] == [4]
    assert [a.name for a in c.axes] == ["i0", "i1", "i2"] and c.reduce_axes[0].name == "r0"


@pytest.mark.parametrize("attrs", [{}, {"transA": 1}, {"transB": 1}, {"transA": 1, "transB": 1, "alpha": 0.5,
                                                                        "beta": 2.0}])
@pytest.mark.parametrize("c_shape", [None, (5,), (3, 5), (1, 1), (3, 1)])
def test_gemm(attrs, c_shape):
    a = random((4, 3) if attrs.get("transA") else (3, 4), seed=1)
    b = random((5, 4) if attrs.get("transB") else (4, 5), seed=2)
    weights = {"b": b} if c_shape is None else {"b": b, "c": random(c_shape, seed=3)}
    check_op("Gemm", {"a": a}, weights, **attrs)


CONVS = [
    ((1, 3, 8, 8), (4, 3, 3, 3), {}),
    ((2, 3, 9, 9), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 10), (3, 2, 3, 3), {"dilations": [2, 2], "pads": [2, 1, 0, 2]}),
    ((1, 4, 7, 7), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((1, 4, 7, 7), (6, 2, 3, 3), {"group": 2}),
    ((1, 6, 7, 7), (9, 2, 3, 3), {"group": 3, "pads": [1, 1, 1, 1], "strides": [2, 1]}),
    ((1, 3, 6, 6), (6, 1, 3, 3), {"group": 3}),  # depthwise with a channel multiplier
    ((1, 3, 7, 8), (2, 3, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 7, 8), (2, 3, 4, 4), {"auto_pad": "SAME_LOWER"}),
    ((1, 3, 7, 8), (2, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 1]}),
    ((2, 3, 12), (4, 3, 5), {"pads": [2, 2], "strides": [3]}),
    ((1, 2, 5, 6, 4), (3, 2, 3, 3, 2), {"pads": [1, 1, 0, 1, 1, 1]}),
]


@pytest.mark.parametrize("x,w,attrs", CONVS)
@pytest.mark.parametrize("bias", [False, True])
def test_conv(x, w, attrs, bias):
    weights = {"w": random(w, seed=2)}
    if bias:
        weights["b"] = random(w[:1], seed=3)
    check_op("Conv", {"x": random(x, seed=1)}, weights, **attrs)


def test_conv_reduces_over_channels_and_kernel_with_padded_loads():
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                       {"x": random((1, 3, 8, 8))}, ["y"], {"w": random((4, 3, 3, 3))})
    (node,) = import_model(model).nodes
    assert [a.extent for a in node.compute.reduce_axes] == [3, 3, 3]
    pads = {ld.input: ld.pad for ld in loads_of(node.compute)}
    assert pads == {0: 0.0, 1: None}


def test_grouped_conv_has_a_group_axis_and_affine_indices():
    """Groups of several output channels: (n, group, channel, h, w), viewed as (n, m, h, w)."""
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], group=3, pads=[1, 1, 1, 1])],
                       {"x": random((1, 6, 7, 7))}, ["y"], {"w": random((9, 2, 3, 3)), "b": random((9,))})
    g = import_model(model)
    (node,) = g.nodes
    assert [a.extent for a in node.compute.axes] == [1, 3, 3, 7, 7]
    assert g.tensors[g.outputs[0]].shape == (1, 9, 7, 7)
    assert all(not (isinstance(e, Call) and e.op in {"floordiv", "floormod"})
               for ld in loads_of(node.compute) for i in ld.indices for e in walk(i))


@pytest.mark.parametrize("op, inputs, weights, attrs", [
    ("MatMul", {"a": (2, 3, 64)}, {"b": (64, 5)}, {}),
    ("Gemm", {"a": (3, 64)}, {"b": (5, 64), "c": (5,)}, {"transB": 1, "alpha": 0.5}),
    ("Conv", {"x": (1, 8, 5, 5)}, {"w": (4, 8, 3, 3), "bias": (4,)}, {"pads": [1, 1, 1, 1]}),
    ("ConvTranspose", {"x": (1, 8, 4, 4)}, {"w": (8, 4, 3, 3), "bias": (4,)}, {"strides": [2, 2]}),
])
def test_half_contractions_sum_in_float32_and_round_once(op, inputs, weights, attrs):
    """As onnxruntime does: rounding every product to half would be off by several half ulps."""
    def half(shapes: dict, seed: int) -> dict:
        return {n: random(s, np.float16, seed=seed + k) for k, (n, s) in enumerate(shapes.items())}

    check_op(op, half(inputs, 0), half(weights, 10), rel_l2=1e-4, **attrs)
