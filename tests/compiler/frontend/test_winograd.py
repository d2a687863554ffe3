"""3x3 stride-1 convolutions lowered as Winograd F(2x2, 3x3): which ones take it, and that
they match onnxruntime through the frontend's interpreter and through compiled kernels."""

import pytest
from frontend_kit import check_op, make_model, random
from onnx import helper

from compiler.frontend import import_model
from compiler.pipeline import compile_model

C = 64  # the fewest channels that take the Winograd path (winograd.MIN_CHANNELS)


def _uses_winograd(x_shape, w_shape, **attrs) -> bool:
    node = helper.make_node("Conv", ["x", "w"], ["y"], **attrs)
    graph = import_model(make_model([node], {"x": random(x_shape)}, ["y"], {"w": random(w_shape, seed=1)}))
    n, k = x_shape[0], w_shape[0]
    return any(nd.compute.shape[:3] == (n, 16, k) for nd in graph.nodes)  # the batched matmul of 16


@pytest.mark.parametrize("x_shape,attrs", [
    ((1, C, 28, 28), {"pads": [1, 1, 1, 1]}),
    ((2, C, 30, 30), {}),                                # no padding: every window inside
    ((1, C, 29, 29), {"pads": [1, 0, 0, 1]}),            # asymmetric
    ((1, C, 28, 28), {"auto_pad": "SAME_UPPER"}),
])
@pytest.mark.parametrize("bias", [True, False])
def test_winograd_convolutions_match_onnxruntime(x_shape, attrs, bias):
    assert _uses_winograd(x_shape, (C, C, 3, 3), **attrs)
    weights = {"w": random((C, C, 3, 3), seed=1, low=-0.2, high=0.2)}
    if bias:
        weights["b"] = random((C,), seed=2)
    check_op("Conv", {"x": random(x_shape)}, weights, **attrs)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, C, 28, 28), (C, C, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, C, 28, 28), (C, C, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, C, 27, 27), (C, C, 3, 3), {"pads": [1, 1, 1, 1]}),       # odd output
    ((1, 32, 56, 56), (32, 32, 3, 3), {"pads": [1, 1, 1, 1]}),    # too few channels
    ((1, C, 14, 14), (C, C, 3, 3), {"pads": [1, 1, 1, 1]}),       # too few tiles
    ((1, C, 28, 28), (C, C // 2, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),
    ((1, C, 28, 28), (C, C, 5, 5), {"pads": [2, 2, 2, 2]}),
])
def test_other_convolutions_run_direct(x_shape, w_shape, attrs):
    assert not _uses_winograd(x_shape, w_shape, **attrs)


def test_compiled_winograd_convolution_with_relu_validates(tmp_path):
    w = random((C, C, 3, 3), seed=1, low=-0.2, high=0.2)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, {"x": random((1, C, 28, 28))}, ["y"], {"w": w, "b": random((C,), seed=2)})
    result = compile_model(model.SerializeToString(), "cpu", {"threads": 2}, output=tmp_path / "m.tar.gz")
    assert result.validation["passed"] is True and result.validation["rel_l2_error"] < 1e-5
