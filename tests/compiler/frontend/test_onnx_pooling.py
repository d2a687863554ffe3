"""Pooling lowerings against onnxruntime."""

import pytest
from frontend_kit import check_op, random

POOLS = [
    {"kernel_shape": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [3, 3], "auto_pad": "VALID", "strides": [1, 2]},
    # ceil_mode windows larger than the input (HF EfficientNet's AvgPool2d(1280) over 7x7)
    {"kernel_shape": [16, 12], "strides": [16, 12], "ceil_mode": 1},
    {"kernel_shape": [11, 10], "strides": [11, 4], "pads": [1, 0, 0, 1], "ceil_mode": 1},
]


@pytest.mark.parametrize("attrs", POOLS)
def test_max_pool(attrs):
    check_op("MaxPool", {"x": random((2, 3, 9, 8))}, **attrs)


def test_max_pool_dilated_and_1d_3d():
    check_op("MaxPool", {"x": random((1, 2, 10, 10))}, kernel_shape=[3, 3], dilations=[2, 2], pads=[1, 1, 1, 1])
    check_op("MaxPool", {"x": random((1, 2, 11))}, kernel_shape=[3], strides=[2])
    check_op("MaxPool", {"x": random((1, 2, 5, 6, 4))}, kernel_shape=[2, 2, 2], strides=[2, 2, 1])


@pytest.mark.parametrize("attrs", POOLS)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool(attrs, include_pad):
    check_op("AveragePool", {"x": random((2, 3, 9, 8))}, count_include_pad=include_pad, **attrs)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (1, 4, 7), (1, 2, 3, 4, 5)])
def test_global_pools(op, shape):
    check_op(op, {"x": random(shape)})
