"""Roller rTile construction: fit, alignment, reuse, scale-out and every kind of Compute."""

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cost"))  # shared TE operators
from te_operators import (
    add_relu,
    batch_matmul,
    conv2d,
    matmul,
    operator_set,
    row_max,
    row_mean,
    row_sum_exp,
    total_sum,
    transpose,
)

from compiler.cost import TileAnalysis, resources
from compiler.schedule.rtile import CUDA_THREAD_REGISTERS, REGISTER_SIZES, construct
from compiler.target import get_target
from compiler.target.cuda import SPECS

GPUS = [f"cuda:{s.key}" for s in SPECS]
OPS = operator_set()
SAMPLE = ["matmul_4096", "matmul_odd", "bmm_attention", "conv_resnet_3x3", "conv_1x1",
          "softmax_max", "add_relu_4d", "gather"]


def _fits_cuda(compute, candidate, target):
    res = resources(TileAnalysis(compute), candidate.tile, target)
    assert res.smem_bytes <= target.extras["smem_static_per_block"]  # launchable without opt-in
    assert res.smem_bytes <= target.extras["smem_per_block"]
    assert res.smem_bytes <= target.level("smem").capacity
    assert res.registers <= CUDA_THREAD_REGISTERS
    assert res.registers * res.threads <= target.registers
    assert res.threads <= 512
    assert candidate.estimate.fits


@pytest.mark.parametrize("gpu", GPUS)
def test_tiles_fit_shared_memory_and_registers_on_every_gpu(gpu):
    t = get_target(gpu)
    for name in SAMPLE:
        for cand in construct(OPS[name], t):
            _fits_cuda(OPS[name], cand, t)


def test_cpu_tiles_fit_caches_and_vector_registers():
    t = get_target("cpu")
    for name, c in OPS.items():
        an = TileAnalysis(c)
        for cand in construct(c, t):
            res = resources(an, cand.tile, t)
            assert res.registers <= t.registers, name
            assert res.micro_bytes <= t.level("l1").capacity, name
            assert res.block_bytes <= t.level("l2").capacity, name


@pytest.mark.parametrize("name", ["cuda:v100", "cuda:a100", "cuda:h100", "cpu"])
def test_matmul_tiles_grow_square_ish(name):
    best = construct(matmul(4096, 4096, 4096), get_target(name))[0].tile
    for sizes in (best.block, best.thread):
        assert max(sizes) / min(sizes) <= 4, best
    assert math.prod(best.block) >= 64 * 64
    assert math.prod(best.thread) >= 16


@pytest.mark.parametrize("name", [*GPUS, "cpu"])
def test_scale_out_fills_the_units(name):
    t = get_target(name)
    for c in (matmul(2048, 2048, 1024), conv2d(8, 64, 56, 56, 64, 3, 3, 1, 1),
              add_relu(16, 64, 56, 56)):
        best = construct(c, t)[0]
        assert best.estimate.tiles >= t.units, (name, c.label, best.tile)


@pytest.mark.parametrize("name", GPUS)
def test_scale_out_fills_the_units_where_no_split_keeps_whole_warps(name):
    # MobileNetV2's 960 -> 320 projection at 7 x 7: no power-of-two block of 7 x 7 has whole
    # warps x 4 of threads, so the tile stayed the whole 320 x 49 output (4 GEMM blocks)
    t = get_target(name)
    for c in (conv2d(1, 960, 7, 7, 320, 1, 1), conv2d(1, 512, 7, 7, 512, 3, 3, 1, 1)):
        best = construct(c, t)[0]
        assert best.estimate.tiles >= t.units, (name, best.tile)


@pytest.mark.parametrize("channels", [144, 240, 1000])
def test_scale_out_splits_a_row_whose_half_is_not_whole_lines(channels):
    # a squeeze-excitation's global pool (EfficientNet's 144 channels of 56 x 56): 72 channels
    # are not whole cache lines, so halving was refused and one core read all 1.8 MB
    best = construct(row_mean(channels, 56 * 56), get_target("cpu"))[0]
    assert best.estimate.tiles >= 2, best.tile


@pytest.mark.parametrize("name", [*GPUS, "cpu"])
def test_alignment_rules_hold(name):
    t = get_target(name)
    for op in ("matmul_4096", "bert_qkv", "bmm_attention", "add_relu_1d", "bias_add"):
        c = OPS[op]
        inner = c.axes[-1].extent
        for cand in construct(c, t):
            tile = cand.tile
            if t.kind == "cuda":
                assert tile.block[-1] % 8 == 0 or tile.block[-1] >= inner  # 32-byte sectors
                threads = math.prod(-(-b // r) for b, r in zip(tile.block, tile.thread, strict=True))
                assert threads % 128 == 0 and threads <= 512, (op, tile)
                assert all(r in REGISTER_SIZES or r in {4 * k for k in (1, 2, 4)}
                           for r in tile.thread), (op, tile)
                assert all(s in {8, 32} or s == a.extent
                           for s, a in zip(tile.reduce_step, c.reduce_axes, strict=True)), (op, tile)
            else:
                assert tile.block[-1] % 16 == 0 or tile.block[-1] >= inner  # 64-byte lines
                # whole vectors, at least two per row (one-vector rows defeat gcc)
                assert tile.thread[-1] % t.lanes == 0 and tile.thread[-1] >= 2 * t.lanes, (op, tile)
                assert all(s in {8, 32, 128, 512} or s == a.extent
                           for s, a in zip(tile.reduce_step, c.reduce_axes, strict=True)), (op, tile)
            assert all(b % r == 0 or b >= e for b, r, e in
                       zip(tile.block, tile.thread, c.shape, strict=True)), (op, tile)


def test_cpu_vectors_follow_the_element_size():
    t = get_target("cpu")
    for dt, size in (("float32", 4), ("float64", 8), ("float16", 2)):
        tile = construct(add_relu(64, 4096, dt=dt), t, top_k=1)[0].tile
        lanes = max(1, t.lanes * 4 // size)
        assert tile.thread[-1] % lanes == 0 and tile.vector == lanes, (dt, tile)


def test_vector_width_divides_the_register_tile_or_fills_the_simd_lanes():
    """CUDA accesses divide the register tile; the CPU uses its whole SIMD width wherever
    a row holds one vector (the renderer overlaps the last vector of a row)."""
    cpu = get_target("cpu")
    for name in ("cuda:a100", "cpu"):
        for c in OPS.values():
            tile = construct(c, get_target(name), top_k=1)[0].tile
            if not tile.thread:
                continue
            if name == "cpu" and tile.thread[-1] >= cpu.lanes:
                assert tile.vector == cpu.lanes
            else:
                assert tile.thread[-1] % tile.vector == 0


def test_big_matmul_predicted_compute_bound_elementwise_memory_bound():
    for name in ("cuda:v100", "cuda:a100", "cuda:h100", "cpu"):
        t = get_target(name)
        assert construct(matmul(4096, 4096, 4096), t)[0].estimate.bound == "compute"
        assert construct(add_relu(1 << 24), t)[0].estimate.bound in {"dram", "l2"}


def test_candidates_are_ranked_and_distinct():
    cands = construct(conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1), get_target("cuda:a10"), top_k=5)
    assert 1 <= len(cands) <= 5
    times = [c.estimate.time_us for c in cands]
    assert times == sorted(times)
    assert len({c.tile for c in cands}) == len(cands)
    assert len(construct(matmul(512, 512, 512), get_target("cpu"), top_k=2)) <= 2


def test_construction_is_deterministic():
    t = get_target("cuda:l4")
    c = batch_matmul(12, 384, 384, 64)
    assert [x.tile for x in construct(c, t)] == [x.tile for x in construct(c, t)]


@pytest.mark.parametrize("name", ["cuda:h100", "cpu"])
@pytest.mark.parametrize("compute", [
    add_relu(3, 5, 7),  # element-wise, odd extents
    row_max(4096, 1000),  # reduction over the innermost axis
    row_sum_exp(7, 3),
    total_sum(1024, 1024),  # 0-d output
    matmul(1, 1, 4096),  # extent-1 axes
    matmul(1, 4096, 1),
    transpose(1, 1),
    add_relu(1 << 33),  # huge extent
    matmul(1 << 20, 1 << 20, 1 << 16),
], ids=["ew_odd", "row_max", "row_small", "scalar_out", "dot", "outer_k1", "one_elem",
        "huge_ew", "huge_gemm"])
def test_every_kind_of_compute_gets_a_fitting_tile(name, compute):
    t = get_target(name)
    cands = construct(compute, t)
    assert cands and all(c.estimate.fits for c in cands)
    tile = cands[0].tile
    assert len(tile.block) == len(tile.thread) == len(compute.axes)
    assert len(tile.reduce_step) == len(compute.reduce_axes)
    assert all(1 <= r <= b for r, b in zip(tile.thread, tile.block, strict=True))
    assert all(1 <= s <= max(1, a.extent) for s, a in zip(tile.reduce_step, compute.reduce_axes,
                                                          strict=True))
    assert cands[0].estimate.time_us > 0


def test_zero_size_output_gets_one_trivial_tile():
    for name in ("cuda:t4", "cpu"):
        cands = construct(add_relu(0, 128), get_target(name))
        assert len(cands) == 1
        assert cands[0].tile.block == (1, 1) and cands[0].estimate.time_us == 0


def test_random_shapes_always_get_fitting_tiles():
    rng = random.Random(7)
    targets = [get_target(n) for n in ("cpu", "cuda:t4", "cuda:a10", "cuda:h100")]

    def dim() -> int:
        return rng.choice([1, 2, 3, 7, 13, 16, 31, 100, 255, 1000, 4097, 1 << 20])

    makers = [
        lambda: matmul(dim(), dim(), dim()),
        lambda: batch_matmul(rng.choice([1, 12]), dim(), dim(), dim()),
        lambda: conv2d(1, rng.choice([3, 64]), rng.choice([7, 14, 56]), rng.choice([7, 14, 56]),
                       rng.choice([16, 1000]), 3, 3, rng.choice([1, 2]), 1),
        lambda: row_max(dim(), dim()),
        lambda: add_relu(*(dim() for _ in range(rng.randrange(1, 5)))),
        lambda: total_sum(dim(), dim()),
        lambda: transpose(dim(), dim()),
    ]
    for _ in range(40):
        compute, target = rng.choice(makers)(), rng.choice(targets)
        cands = construct(compute, target)
        assert cands and all(c.estimate.fits for c in cands), (target.name, compute.shape)
        if target.kind == "cuda":
            _fits_cuda(compute, cands[0], target)
