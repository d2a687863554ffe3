"""The CPU GEMM's decisions (compiler/schedule/cpu_gemm.py): micro-kernels built from the
registers and the extents, blocks of whole micro-kernels that keep the cores busy, the
row blocks prepacked weights allow, and which windows are read in place."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from compiler.ir import te
from compiler.ir.contraction import match_contraction
from compiler.ir.te import Compute, Load, TensorType
from compiler.schedule.cpu_gemm import (
    C_TILE_L2_PARTS,
    fma_rate,
    gemm_blocking,
    gemm_contraction,
    micro_kernel,
    orientations,
)
from compiler.schedule.merge_axes import merge_axes
from compiler.schedule.plan import TileConfig
from compiler.schedule.tiling import default_tile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))  # the C kernels' cases and targets
from test_c_gemm import CPU, cpu, window_conv
from test_c_kernels import axes, conv2d, i0, i1, i2, i3, matmul, r0, r1, r2


def test_micro_kernels_are_built_from_the_registers_and_the_extents() -> None:
    m = match_contraction(matmul(256, 256, 256))
    assert m is not None
    avx2 = micro_kernel(matmul(256, 256, 256), m, CPU)
    assert (avx2.rows, avx2.vectors) == (6, 2)  # 12 accumulators + 2 B vectors + 1 broadcast
    wide = micro_kernel(matmul(256, 256, 256), m, cpu(16))
    assert (wide.rows, wide.vectors) == (14, 2)  # AVX-512's 32 registers
    narrow_n = matmul(256, 12, 64)
    narrow = micro_kernel(narrow_n, match_contraction(narrow_n), CPU)
    assert (narrow.rows, narrow.vectors) == (8, 1)  # N holds one vector, not two


@pytest.mark.parametrize(("m", "rows"), [(256, 14), (32, 11), (64, 13), (128, 13), (48, 12), (16, 8), (8, 8),
                                         (4, 4), (5, 5)])
def test_micro_kernel_rows_avoid_padding_m(m: int, rows: int) -> None:
    """The fullest micro-kernel unless it pads M by over 5% more than the least padding
    does; then the most rows that pad it within 5% of the least (64 channels: 13 rows pad
    to 65, not 14 to 70 or 8 to 64 with fewer FMAs per load)."""
    c = matmul(m, 64, 64)
    match = match_contraction(c)
    assert match is not None
    mk = micro_kernel(c, match, cpu(16))
    assert (mk.rows, mk.vectors) == (rows, 2)


def test_blocks_are_whole_micro_kernels_and_keep_cores_busy() -> None:
    c = matmul(512, 512, 512)
    m = match_contraction(c)
    assert m is not None
    g = gemm_blocking(c, m, default_tile(c, CPU), CPU)
    assert g.mc % g.mk.rows == 0 and g.nc % g.mk.cols == 0 and g.kc * g.mk.cols * 4 <= 32 << 10
    assert -(-g.m // g.mc) * -(-g.n // g.nc) >= 2 * CPU.units


def test_prepacked_weights_let_row_blocks_fill_l2_so_patches_are_gathered_once() -> None:
    """A convolution packs its input patches (B) again for every row block; with its
    weights (A) packed at load, rows may take all of L2 instead of half of it. (Its
    width read mirrored: patches that cannot be read in place, c/direct.py.)"""
    x = Load(0, (i0, r0, i2 + r1 - 1, te.const(14, "int64") - i3 - r2), "float32", pad=0.0)
    c = Compute(axes(1, 256, 14, 14), x * Load(1, (i1, r0, r1, r2), "float32"),
                (TensorType((1, 256, 14, 14), "float32"), TensorType((256, 256, 3, 3), "float32")),
                "float32", axes(256, 3, 3, prefix="r"), "sum")
    m = match_contraction(c)
    assert m is not None
    tile = default_tile(c, CPU)
    per_call, prepacked = gemm_blocking(c, m, tile, CPU), gemm_blocking(c, m, tile, CPU, constant_inputs=(1,))
    assert per_call.mc < per_call.m <= prepacked.mc
    assert 4 * prepacked.mc * (prepacked.kc + prepacked.nc) <= 512 << 10  # A block and C tile still fit L2


def test_strided_windows_are_read_in_place_by_phases() -> None:
    """Stride 2: the copy's columns split into even and odd, so consecutive output positions
    read consecutive elements (B in place); each tap's offset names its phase."""
    c = conv2d(2, 1, 1, 40, 41)
    m = gemm_contraction(c, CPU)
    assert m is not None
    d = gemm_blocking(c, m, default_tile(c, CPU), CPU, constant_inputs=(1, 2)).direct
    assert d is not None and d.side == "b" and (d.step, d.phases) == (1, 2)
    assert d.stored[-1] == 2 * d.phase_width >= d.extents[-1] == 43  # 41 columns and the pads
    # the taps of one input row: kw = 0, 1, 2 read phases 0, 1, 0, the last one column on
    assert d.koff()[:3] == [0, d.phase_width, 1]


@pytest.mark.parametrize(("kernel", "phased"), [(1, False), (2, True), (3, True)])
def test_only_windows_that_read_every_phase_are_split_in_phases(kernel: int, phased: bool) -> None:
    """A 1x1 stride-2 convolution reads only even columns: split in phases, its lines would
    hold the odd ones too, half its multiply-adds on positions nobody stores, so it is not
    read in place as B; a 2x2 (a patchify downsampling) or 3x3 window reads both phases."""
    c = window_conv(1, 64, 128, 32, 32, kernel, kernel, pads=None, stride=2)
    m = gemm_contraction(c, CPU)
    assert m is not None
    layouts = [w.direct for w in orientations(c, m, CPU, constant_inputs=(1, 2)) if w.direct is not None]
    assert any(d.side == "b" and d.phases == 2 for d in layouts) == phased
    assert all(d.side == "a" for d in layouts) or phased


@pytest.mark.parametrize("stride", [1, 2])
def test_the_farthest_tap_is_found_without_listing_the_taps(stride: int) -> None:
    c = conv2d(stride, 1, 1, 40, 41)
    m = gemm_contraction(c, CPU)
    assert m is not None
    d = gemm_blocking(c, m, default_tile(c, CPU), CPU, constant_inputs=(1, 2)).direct
    assert d is not None and d.max_koff() == max(d.koff())


def test_strides_beyond_the_phases_are_gathered() -> None:
    c = conv2d(5, 1, 1, 40, 41)
    m = gemm_contraction(c, CPU)
    assert m is not None and gemm_blocking(c, m, default_tile(c, CPU), CPU, constant_inputs=(1, 2)).direct is None


@pytest.mark.parametrize("units", [1, 2, 3, 4])
def test_tasks_keep_every_core_busy(units: int) -> None:
    """Three column blocks of 256 on two cores would leave one idle a third of the time:
    the blocks narrow until static shares of the panels keep the cores 90% busy."""
    c = matmul(64, 768, 64)
    m = match_contraction(c)
    assert m is not None
    target = dataclasses.replace(cpu(16), units=units)
    g = gemm_blocking(c, m, TileConfig((64, 256), (14, 32), (64,), 16), target)
    panels = [min(g.nc, g.n - n0) // g.mk.cols for n0 in range(0, g.n, g.nc)] * -(-g.m // g.mc)
    share, extra = divmod(len(panels), units)
    runs = [sum(panels[u * share + min(u, extra):(u + 1) * share + min(u + 1, extra)]) for u in range(units)]
    assert sum(panels) / (units * max(runs)) >= 0.9
    assert units > 1 or len(panels) == 3  # one core: the tile's blocks as they were


def test_a_weights_panels_fill_l1_and_panels_packed_per_call_half() -> None:
    """B packed at load streams from memory, the next panel prefetched: its panels may fill
    L1, halving the C tile's loads and stores; B packed per call keeps to half of L1."""
    c = matmul(128, 768, 3072)
    m = match_contraction(c)
    assert m is not None
    tile = default_tile(c, cpu(16))
    weights, per_call = (gemm_blocking(c, m, tile, cpu(16), constants) for constants in ((1,), ()))
    l1 = 32 << 10  # the targets here name no caches: the common size
    assert weights.kc * weights.mk.cols * 4 == l1 == 2 * per_call.kc * per_call.mk.cols * 4


def test_a_convolutions_c_tile_keeps_to_a_share_of_l2() -> None:
    """A convolution (weights packed at load) on a large map: its column blocks narrow until
    the C tile takes at most 1 / C_TILE_L2_PARTS of L2 (512 KiB here: the test target names
    no caches), in place or gathered: 64 x 4096 would take 1 MiB."""
    conv = window_conv(1, 32, 64, 128, 128, 3, 3, stride=2)
    merged, tile = merge_axes(conv, default_tile(conv, cpu(16)))
    m = gemm_contraction(merged, cpu(16))
    assert m is not None
    for way in orientations(merged, m, cpu(16), constant_inputs=(1, 2)):
        g = gemm_blocking(merged, m, tile, cpu(16), (1, 2), way)
        assert 4 * g.mc * g.nc <= (512 << 10) // C_TILE_L2_PARTS


@pytest.mark.parametrize(("ci", "co", "size"), [(1024, 256, 14), (1024, 512, 14), (512, 128, 7), (64, 64, 56)])
def test_avx2_ranks_first_a_micro_kernel_that_fills_the_fma_pipes(ci: int, co: int, size: int) -> None:
    """ResNet-50's 1x1 convolutions: counting FMAs alone, AVX2's 16 registers put the positions
    in place as A on 4 or 5 rows x 2 vectors (8-10 accumulators) first, which timed 1.1-1.4x
    slower than 6 x 2 on gathered panels (Zen 2 and Zen 3). Priced at the rate their
    accumulators keep (`fma_rate`), the first holds 12. With AVX-512's 32 registers the rate
    is 1 throughout: its ranking is unchanged."""
    conv = window_conv(1, ci, co, size, size, 1, 1, pads=None)
    merged, _ = merge_axes(conv, default_tile(conv, CPU))
    m = gemm_contraction(merged, CPU)
    assert m is not None
    first = orientations(merged, m, CPU, constant_inputs=(1, 2))[0]
    assert first.micro.rows * first.micro.vectors >= 12
    wide = orientations(merged, m, cpu(16), constant_inputs=(1, 2))
    assert all(fma_rate(way.micro, cpu(16)) == 1.0 for way in wide)


def test_positions_in_place_as_a_are_offered_wider_kernels_that_hold_as_many_accumulators() -> None:
    """A 64-channel 3x3 convolution dilated 6 on 32 x 32 (a segmenter's ASPP branch), AVX-512:
    the positions read in place as A run 8 rows x 2 vectors first; 4 rows x 4 vectors (all 64
    channels per broadcast, 16 accumulators) is offered beside it to be timed, though it has
    fewer rows (it timed 580 against 606 us, one thread, Zen 4). Priced no cheaper than the
    first, it never displaces it unmeasured. Kernels with fewer accumulators are not offered."""
    conv = window_conv(1, 64, 64, 32, 32, 3, 3, dilation=6, pads=(6, 6, 6, 6))
    merged, _ = merge_axes(conv, default_tile(conv, cpu(16)))
    m = gemm_contraction(merged, cpu(16))
    assert m is not None
    ways = orientations(merged, m, cpu(16), constant_inputs=(1, 2))
    in_place_a = [w for w in ways if w.direct is not None and w.direct.side == "a"]
    first = in_place_a[0]
    assert (first.micro.rows, first.micro.vectors) == (8, 2)
    assert (4, 4) in {(w.micro.rows, w.micro.vectors) for w in in_place_a}
    assert all(w.micro.rows * w.micro.vectors >= 16 and w.cost >= first.cost for w in in_place_a[1:])


def test_computed_weights_small_beside_the_patches_are_read_as_weights() -> None:
    """A 1x1 convolution whose weights are computed (a squeeze-excitation gate folded into
    them: compiler/frontend/fusion.py `ChannelScaleFolding`) is offered its input read in place
    as B, as with constant weights, where the weights are small beside the map (24 rows
    against 3136 positions: MBConv's projection on 56 x 56); two like-sized activations (the
    same 24 channels on a 3 x 3 map) keep the plain ways."""
    conv = window_conv(1, 144, 24, 56, 56, 1, 1)
    merged, _ = merge_axes(conv, default_tile(conv, cpu(16)))
    m = gemm_contraction(merged, cpu(16))
    assert m is not None
    ways = orientations(merged, m, cpu(16), constant_inputs=())
    assert any(w.direct is not None and w.direct.side == "b" for w in ways)
    small = window_conv(1, 144, 24, 3, 3, 1, 1)
    merged, _ = merge_axes(small, default_tile(small, cpu(16)))
    m = gemm_contraction(merged, cpu(16))
    assert m is not None
    assert all(w.direct is None for w in orientations(merged, m, cpu(16), constant_inputs=()))
