"""The other ways to run an rTile on a CPU (compiler/schedule/cpu_tile.py `cpu_tile_variants`):
a GEMM's every orientation the model weighs (compiler/schedule/cpu_gemm.py `gemm_variants`)
and, for long tasks, its blocking that keeps the cores evenly busy,
a depthwise convolution's planes, lanes or micro-tiles, ranked by the model and planned in full, so
that the compile can measure them where the model's ranking may be wrong for the host."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import frontend
from compiler.schedule.cpu_gemm import EVEN, EVEN_TASK_FLOPS, gemm_variants, with_gemm_blocking
from compiler.schedule.cpu_tile import cpu_tile_variants, plan_cpu_tile
from compiler.schedule.plan import TileConfig
from compiler.schedule.tiling import default_tile
from compiler.target.registry import get_target

AVX2 = dataclasses.replace(get_target("cpu:x86-64-v3"), units=2)  # two cores on any host


def one_node(node: onnx.NodeProto, x_shape: list[int], w: np.ndarray):
    """The Compute of a graph of `node` alone, reading input x and constant weights w (input 1)."""
    g = helper.make_graph([node], "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w")])
    graph = frontend.import_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                                  .SerializeToString())
    (lowered,) = graph.nodes
    return lowered.compute


def conv3x3(channels: int, size: int, group: int = 1):
    """The Compute of a 3x3, pad-1 convolution with constant weights (input 1 of the kernel),
    lowered direct (an odd size: 64 channels on 28 x 28 would take Winograd's contractions)."""
    w = np.random.default_rng(0).standard_normal((channels, channels // group, 3, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=group)
    return one_node(node, [1, channels, size, size], w)


def test_a_convolution_has_its_orientations_ranked_by_the_model() -> None:
    c = conv3x3(64, 27)
    tile = default_tile(c, AVX2)
    variants = gemm_variants(c, tile, AVX2, constant_inputs=(1,))
    # gathering the patches, reading them in place as B, and (swapped) in place as A, its
    # 27-wide lines leaving AVX2's two-vector micro-kernel 4 rows, so 3 vectors wide too (in
    # place as B, storing each block as it is done and the tile after the last K block)
    ways = {(t.gemm.swapped, t.gemm.direct.side if t.gemm.direct else None, t.gemm.mk.vectors, t.gemm.tile_stores)
            for _, t in variants}
    assert len(ways) == len(variants) >= 2
    relative = [r for r, _ in variants]
    assert relative[0] == 1.0 and relative == sorted(relative)
    # the first is the model's choice, as planned without variants
    assert variants[0][1] == with_gemm_blocking(c, tile, AVX2, constant_inputs=(1,))
    # the backend's variants are the others, planned in full like plan_cpu_tile's tile
    others = cpu_tile_variants(c, tile, AVX2, constant_inputs=(1,))
    planned = plan_cpu_tile(c, tile, AVX2, constant_inputs=(1,))
    assert [t.gemm for _, t in others] == [t.gemm for _, t in variants[1:]]
    assert all(t.serial == planned.serial for _, t in others)


def linear(rows: int, k: int, n: int):
    """The Compute of x @ W with a constant W (input 1)."""
    w = np.random.default_rng(0).standard_normal((k, n)).astype(np.float32)
    return one_node(helper.make_node("MatMul", ["x", "w"], ["y"]), [rows, k], w)


def _way(g) -> tuple:
    """A blocking's orientation (`orientations`): its sides, micro-kernel, operand read in place."""
    return g.swapped, g.mk, g.direct


def _busy(g, units: int) -> float:
    """Share of `units` cores' time busy with g's static tasks (each its panels of work)."""
    work = [min(g.mc, g.m - m0) * min(g.nc, g.n - n0) for m0 in range(0, g.m, g.mc) for n0 in range(0, g.n, g.nc)]
    share, extra = divmod(len(work), units)
    runs = [sum(work[u * share + min(u, extra):(u + 1) * share + min(u + 1, extra)]) for u in range(units)]
    return sum(work) / (units * max(runs))


@pytest.mark.parametrize("units", [1, 2])
def test_long_tasks_are_offered_a_blocking_that_keeps_the_cores_evenly_busy(units: int) -> None:
    # GPT-2's QKV projection: 9 column blocks, 5 and 4 a core on two (90% busy)
    target = dataclasses.replace(get_target("cpu:x86-64-v4"), units=units)
    c = linear(128, 768, 2304)
    tile = default_tile(c, target)
    variants = gemm_variants(c, tile, target, constant_inputs=(1,))
    first = variants[0][1].gemm
    assert first is not None and variants[0][1] == with_gemm_blocking(c, tile, target, constant_inputs=(1,))
    tasks = -(-first.m // first.mc) * -(-first.n // first.nc)
    assert 2 * first.m * first.n * first.k / tasks >= EVEN_TASK_FLOPS
    evens = [t.gemm for _, t in variants[1:] if t.gemm is not None and _way(t.gemm) == _way(first)]
    if units == 1:  # one core is always busy
        assert evens == []
        return
    assert _busy(first, units) < EVEN
    (even,) = evens
    assert _busy(even, units) >= EVEN


def test_short_tasks_keep_the_first_blocking_alone() -> None:
    target = dataclasses.replace(get_target("cpu:x86-64-v4"), units=2)
    c = linear(128, 64, 2304)  # as many blocks, a twelfth of the work each
    variants = gemm_variants(c, default_tile(c, target), target, constant_inputs=(1,))
    first = variants[0][1].gemm
    assert first is not None and _busy(first, 2) < EVEN
    assert all(t.gemm is not None and _way(t.gemm) != _way(first) for _, t in variants[1:])


def test_a_gemm_with_one_way_has_no_variants() -> None:
    c = conv3x3(64, 27)
    tile = default_tile(c, AVX2)
    # weights not constant: nothing is packed at load, so nothing is read in place
    assert len(gemm_variants(c, tile, AVX2)) == 1
    assert cpu_tile_variants(c, tile, AVX2) == []


def _form(tile: TileConfig) -> str:
    return "micro" if tile.plane is None else type(tile.plane).__name__


def test_a_depthwise_convolution_has_planes_lanes_and_micro_tiles() -> None:
    # planes win on small maps, micro-tiles on wide ones (plane_conv.py), channels in lanes
    # where they split into whole vectors (lane_conv.py): the others are the variants
    for size, planes in ((14, True), (112, False)):
        c = conv3x3(32, size, group=32)
        tile = default_tile(c, AVX2)
        planned = plan_cpu_tile(c, tile, AVX2, constant_inputs=(1,))
        variants = cpu_tile_variants(c, tile, AVX2, constant_inputs=(1,))
        forms = [_form(planned)] + [_form(t) for _, t in variants]
        # 112 x 112: the lanes' copy outgrows the scratch
        assert sorted(forms) == sorted({"PlaneConv", "micro"} | ({"LaneConv"} if planes else set()))
        assert (_form(planned) != "micro") == planes
        for relative, other in variants:
            assert other.gemm is None and relative >= 1.0 and other.serial == planned.serial


def test_the_fullest_micro_kernel_is_timed_where_the_model_spared_padding_rows() -> None:
    spr = get_target("cpu:sapphirerapids")  # 32 registers: 14 rows of two vectors
    c = conv3x3(64, 27)
    rows = {(t.gemm.swapped, t.gemm.direct is not None, t.gemm.mk.rows)
            for _, t in gemm_variants(c, default_tile(c, spr), spr, constant_inputs=(1,))}
    # 64 channels: 13 rows pad one (the model's choice), 14 pad six: both are timed
    assert {(False, False, 13), (False, False, 14)} <= rows
    narrow = conv3x3(16, 28)  # 14 rows would pad 16 channels to 28: not worth timing
    assert {t.gemm.mk.rows for _, t in gemm_variants(narrow, default_tile(narrow, spr), spr, (1,))
            if not t.gemm.swapped} == {8}


def test_positions_read_in_place_as_b_also_time_the_tile_stored_after_the_last_k_block() -> None:
    spr = get_target("cpu:sapphirerapids")
    c = conv3x3(64, 27)
    ways = [t.gemm for _, t in gemm_variants(c, default_tile(c, spr), spr, constant_inputs=(1,))]
    in_place_b = [g for g in ways if g is not None and g.direct is not None and g.direct.side == "b"]
    twins = [g for g in in_place_b if g.tile_stores]
    assert len(twins) == 1 and not in_place_b[0].tile_stores  # unmeasured, each block is stored as it is done
    first = ways.index(in_place_b[0])
    assert ways[first + 1] == dataclasses.replace(in_place_b[0], tile_stores=True)


def test_small_maps_also_time_the_positions_gathered_as_a() -> None:
    # 49 positions: in place as A walks 66 (panels of 6 over the plane at its padded period), gathered 50
    c = conv3x3(512, 7)
    ways = {(t.gemm.swapped, t.gemm.direct.side if t.gemm.direct else None): t.gemm
            for _, t in gemm_variants(c, default_tile(c, AVX2), AVX2, constant_inputs=(1,))}
    in_place, gathered = ways[(True, "a")], ways[(True, None)]
    assert in_place.m == 66 and gathered.m == 49 and gathered.mk.rows == 5
    assert gathered.packed and all(p.side == "b" for p in gathered.packed)  # the weights, packed at load
    # where lines nearly fill whole panels in place (23 wide: 24 in panels of 6), gathering saves
    # nothing and is not timed
    whole = conv3x3(64, 23)
    assert (True, None) not in {(t.gemm.swapped, t.gemm.direct) for _, t in
                                gemm_variants(whole, default_tile(whole, AVX2), AVX2, constant_inputs=(1,))}
