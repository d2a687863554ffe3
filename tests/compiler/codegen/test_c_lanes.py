"""Per-channel convolutions with channels in the vector lanes (compiler/schedule/lane_conv.py,
compiler/codegen/c/lanes.py) against the interpreter: small and odd maps, strides,
dilation, a batch, windows larger than the map, channels the lanes do not divide,
epilogues on vectors (a bias and a select) and per element (a residual read along the
plane), at 16, 8 and 4 lanes; each with its taps gathered per task and packed at load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary

from compiler.codegen.c.lanes import render_lanes
from compiler.codegen.csource import CSource
from compiler.ir import te
from compiler.ir.interp import evaluate
from compiler.ir.te import Axis, Compute, Expr, Load, TensorType, Var, call, select
from compiler.schedule.lane_conv import LaneConv, lane_conv, lane_cost
from compiler.schedule.plan import TileConfig
from compiler.schedule.plane_conv import plane_conv, plane_cost
from compiler.schedule.prepack import prepacked_inputs
from compiler.target import get_target

RNG = np.random.default_rng(41)
LANES = {16: get_target("cpu:x86-64-v4"), 8: get_target("cpu:x86-64-v3"), 4: get_target("cpu:x86-64-v2")}
n, ch, y, x, ky, kx = (Var(v) for v in ("i0", "i1", "i2", "i3", "r0", "r1"))


def depthwise(batch: int, channels: int, size: int, kernel: int, stride: int = 1, dilation: int = 1,
              epilogue: str = "", same: bool = True) -> Compute:
    """Conv(group=channels), 'same' padding (output (batch, channels, ceil(size / stride), ...))
    or none."""
    pad = dilation * (kernel // 2) if same else 0
    out = -(-size // stride) if same else (size - dilation * (kernel - 1) - 1) // stride + 1
    data = Load(0, (n, ch, y * stride + ky * dilation - pad, x * stride + kx * dilation - pad), "float32", pad=0.0)
    taps = Load(1, (ch, te.const(0, "int64"), ky, kx), "float32")
    inputs = [TensorType((batch, channels, size, size), "float32"), TensorType((channels, 1, kernel, kernel), "float32")]
    post: Expr | None = None
    acc = Var("acc", "float32")
    if epilogue == "bias_leaky":  # reads along the channels only: applied to whole vectors
        inputs.append(TensorType((channels,), "float32"))
        v = acc + Load(2, (ch,), "float32")
        post = select(call("lt", v, 0.0), v * 0.1, v)
    elif epilogue == "residual":  # reads the input along the plane: applied per element
        post = acc + Load(0, (n, ch, y, x), "float32")
    axes = (Axis("i0", batch), Axis("i1", channels), Axis("i2", out), Axis("i3", out))
    return Compute(axes, data * taps, tuple(inputs), "float32", (Axis("r0", kernel), Axis("r1", kernel)), "sum", post)


def _lanes_tile(c: Compute, lanes: int, packed: bool = False) -> TileConfig:
    p = plane_conv(c, lanes)
    assert p is not None
    lc = lane_conv(p, constant_taps=packed)
    assert isinstance(lc, LaneConv) and lc.packed_taps == packed
    return TileConfig(tuple(a.extent for a in c.axes), (1,) * len(c.axes), (1, 1), 1, plane=lc)


CASES = {
    "7x7_on_14": (1, 32, 14, 7, 1, 1, ""),
    "5x5_stride2_odd": (1, 16, 15, 5, 2, 1, "bias_leaky"),
    "3x3_dilated_batch2": (2, 16, 9, 3, 1, 2, "residual"),
    "7x7_on_7": (1, 16, 7, 7, 1, 1, "bias_leaky"),
    "3x3_on_5": (1, 48, 5, 3, 2, 1, "residual"),  # fewer positions than a block of lanes
    # no padding, stride 2 on an even map: the last row and column are read by no window
    "3x3_valid_stride2": (1, 16, 8, 3, 2, 1, "bias_leaky", False),
    # channels the lanes do not divide (ShuffleNetV2's 58): the last task's spare lanes
    "partial_channels": (2, 20, 14, 3, 1, 1, "bias_leaky"),
    "partial_58_stride2": (1, 58, 15, 3, 2, 1, ""),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels, targets = {}, {}
    for name, case in CASES.items():
        for lanes, target in LANES.items():
            for packed in (False, True):
                c = depthwise(*case)
                kernels[_symbol(name, lanes, packed)] = (c, _lanes_tile(c, lanes, packed))
                targets[_symbol(name, lanes, packed)] = target
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("lanes")), targets, plan=False)


def _symbol(name: str, lanes: int, packed: bool) -> str:
    return f"k{name}_{lanes}{'_packed' if packed else ''}"


@pytest.mark.parametrize("packed", [False, True], ids=["gathered", "packed"])
@pytest.mark.parametrize("lanes", sorted(LANES))
@pytest.mark.parametrize("name", list(CASES))
def test_channels_in_lanes_match_the_interpreter(library: KernelLibrary, name: str, lanes: int,
                                                 packed: bool) -> None:
    symbol = _symbol(name, lanes, packed)
    c = library.kernels[symbol][0]
    inputs = [RNG.standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    got = library.run(symbol, inputs)  # packed taps: through the packer, as tf_prepare runs it
    np.testing.assert_allclose(got, evaluate(c, inputs), rtol=1e-5, atol=1e-5)


def test_taps_are_packed_only_where_a_weight_is_the_same_for_every_plane() -> None:
    c = depthwise(2, 24, 14, 7)
    tile = _lanes_tile(c, 16, packed=True)
    assert isinstance(tile.plane, LaneConv)
    # two tasks of 16 lanes (the second's spare lanes repeat channel 23), 49 taps each
    assert prepacked_inputs(tile) == {1: 2 * 49 * 16 * 4}
    assert prepacked_inputs(_lanes_tile(c, 16)) == {}
    assert TileConfig.from_json(tile.to_json()) == tile
    data = Load(0, (n, ch, y + ky - 3, x + kx - 3), "float32", pad=0.0)
    per_sample = Compute(c.axes, data * Load(1, (n, ch, ky, kx), "float32"),
                         (c.inputs[0], TensorType((2, 24, 7, 7), "float32")), "float32", c.reduce_axes, "sum")
    p = plane_conv(per_sample, 16)
    assert p is not None
    lc = lane_conv(p, constant_taps=True)  # taps that differ per batch element stay gathered
    assert lc is not None and not lc.packed_taps


def test_the_layout_round_trips() -> None:
    for channels in (32, 24):  # whole vectors of 16, and a last task of 8
        tile = _lanes_tile(depthwise(1, channels, 14, 7), 16)
        assert TileConfig.from_json(tile.to_json()) == tile
        assert isinstance(tile.plane, LaneConv) and tile.plane.groups == 2


def test_lanes_are_cheaper_for_large_windows_on_small_maps_only() -> None:
    def ratio(size: int, kernel: int) -> float:
        c = depthwise(1, 64, size, kernel)
        p = plane_conv(c, 16)
        lc = lane_conv(p) if p is not None else None
        assert p is not None and lc is not None
        return lane_cost(lc) / plane_cost(p, kernel * kernel, 48 << 10)
    assert ratio(14, 7) < 1 and ratio(7, 7) < 1
    assert ratio(28, 3) > 1


def test_a_task_claims_its_own_output_lines_before_writing_them() -> None:
    """Each task of a team prefetches for writing its own channels' output rows (the last
    task of 20 channels only its 4, so no line another thread writes is taken from it);
    a chain's member, writing scratch of its own thread, does not."""
    c = depthwise(1, 20, 14, 3)
    lc = _lanes_tile(c, 16).plane
    assert isinstance(lc, LaneConv) and lc.partial
    for team in (True, False):
        src = CSource()
        params = ["float* restrict out", "const float* restrict in0", "const float* restrict in1"]
        render_lanes(c, lc, params, f"void k({', '.join(params)})", True, src, "k", team=team)
        text = src.text()
        assert ("__builtin_prefetch(cb + q, 1, 3);" in text) == team
        assert ("for (int64_t cr = 0; cr < nv; ++cr)" in text) == team
