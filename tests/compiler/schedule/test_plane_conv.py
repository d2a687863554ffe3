"""Where a depthwise convolution takes the plane path (compiler/schedule/plane_conv.py):
planes whose copy and line fit half of L1 cost less than micro-tiles; beyond, micro-tiles
(measured on AVX-512: 112 x 112 stride 2 and 56 x 56 stride 1 ran faster on micro-tiles)."""

import pytest

from compiler import frontend
from compiler.bench.cnn_blocks import _conv
from compiler.bench.models import _Builder
from compiler.schedule.per_channel import planned_per_channel

L1 = 48 << 10


def _depthwise(channels: int, size: int, stride: int):
    b = _Builder(0)
    y = _conv(b, "x", channels, channels, 3, stride=stride, group=channels)
    g = frontend.import_model(b.model([("x", [1, channels, size, size])], [("y", y)]).SerializeToString())
    (node,) = [n for n in g.nodes if n.compute.reduce_axes]
    return node.compute


@pytest.mark.parametrize(("size", "stride", "planes"), [
    (112, 2, False), (56, 1, False), (56, 2, True), (28, 1, True), (14, 1, True),
])
def test_planes_where_they_fit_half_of_l1(size: int, stride: int, planes: bool) -> None:
    plane = planned_per_channel(_depthwise(32, size, stride), 16, 16, L1)
    assert (plane is not None) == planes
