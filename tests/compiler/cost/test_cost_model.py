"""The micro-performance model: stages, bounds, waves, bank conflicts and limits."""

import pytest
from te_operators import add_relu, column_sum, conv2d, matmul, row_max, total_sum

from compiler.cost import TileAnalysis, estimate, resources, violations
from compiler.cost.resources import reduction_team
from compiler.schedule.plan import TileConfig
from compiler.target import get_target
from compiler.target.cpu import CpuFacts, cpu_target
from compiler.target.cuda import SPECS

GPUS = [f"cuda:{s.key}" for s in SPECS]
GEMM_TILE = TileConfig((128, 128), (8, 8), (32,), 4)


@pytest.mark.parametrize("name", GPUS)
def test_big_matmul_is_compute_bound_and_elementwise_memory_bound(name):
    t = get_target(name)
    assert estimate(matmul(8192, 8192, 8192), GEMM_TILE, t).bound == "compute"
    e = estimate(add_relu(1 << 26), TileConfig((512,), (4,), (), 4), t)
    assert e.bound in {"dram", "l2"}


def test_cpu_bounds():
    t = get_target("cpu")
    gemm = estimate(matmul(2048, 2048, 2048), TileConfig((128, 128), (4, 2 * t.lanes), (128,)), t)
    assert gemm.bound == "compute"
    ew = estimate(add_relu(1 << 26), TileConfig((8192,), (t.lanes,), ()), t)
    assert ew.bound == "dram"


def test_time_is_the_slowest_stage_and_stages_are_levels():
    t = get_target("cuda:a100")
    e = estimate(matmul(1024, 1024, 1024), GEMM_TILE, t)
    assert e.time_us == max(e.stages.values()) and e.stages[e.bound] == e.time_us
    assert set(e.stages) == {"dram", "l2", "smem", "compute"}
    cpu = estimate(matmul(256, 256, 256), TileConfig((64, 64), (4, 8), (32,)), get_target("cpu"))
    assert {"dram", "l2", "l1", "compute"} <= set(cpu.stages)


def test_bigger_blocks_move_fewer_dram_bytes():
    t = get_target("cuda:v100")
    c = matmul(4096, 4096, 4096)
    small = estimate(c, TileConfig((32, 32), (4, 4), (32,)), t)
    big = estimate(c, GEMM_TILE, t)
    assert big.stages["l2"] < small.stages["l2"] / 3
    assert big.time_us < small.time_us


def test_wave_quantisation_penalises_one_tile_too_many():
    t = get_target("cuda:h100")
    assert t.units == 132
    tile = TileConfig((128, 128), (8, 8), (32,))
    full = estimate(matmul(128 * 132, 128, 4096), tile, t)  # exactly one tile per SM
    over = estimate(matmul(128 * 133, 128, 4096), tile, t)  # one SM runs two
    assert (full.tiles, over.tiles) == (132, 133)
    assert over.stages["compute"] > 1.8 * full.stages["compute"]


def test_unpadded_shared_memory_rows_pay_bank_conflicts():
    t = get_target("cuda:t4")
    c = matmul(2048, 2048, 2048)
    tile = TileConfig((64, 64), (4, 4), (32,))  # 32-float rows: every row on bank 0
    padded = estimate(c, tile, t)
    unpadded = estimate(c, tile, t, padded_smem=False)
    assert unpadded.stages["smem"] > 8 * padded.stages["smem"]


def test_limits_are_reported():
    t = get_target("cuda:t4")
    c = matmul(4096, 4096, 4096)
    too_big = estimate(c, TileConfig((256, 256), (8, 8), (64,)), t)  # 128 KB of smem
    assert not too_big.fits
    assert any("shared memory" in v for v in too_big.violations)
    cpu = get_target("cpu")
    huge = TileConfig((2048, 2048), (4, cpu.lanes), (512,))
    assert any("L2" in v for v in violations(resources(TileAnalysis(c), huge, cpu), cpu))


def test_register_budget_counts_accumulators_and_inputs():
    t = get_target("cuda:a100")
    an = TileAnalysis(matmul(1024, 1024, 1024))
    res = resources(an, TileConfig((128, 128), (8, 8), (32,)), t)
    assert res.threads == 256
    assert res.registers == 64 + 8 + 8 + 16  # accumulators, a column of A, a row of B, overhead
    assert res.smem_bytes == (128 * (32 + 1) + 32 * (128 + 1)) * 4  # padded rows


def test_zero_size_costs_nothing():
    e = estimate(add_relu(0, 16), TileConfig((1, 16), (1, 4), ()), get_target("cuda:l4"))
    assert e.time_us == 0 and e.tiles == 0


def test_row_reduction_reads_each_row_once_from_dram():
    t = get_target("cuda:a10")
    e = estimate(row_max(4096, 1024), TileConfig((128,), (1,), (32,)), t)
    assert e.bound in {"dram", "compute"} and e.tiles == 32


def test_contiguous_row_reductions_get_a_thread_team_per_row():
    an = TileAnalysis(row_max(4096, 1000))
    assert reduction_team(an, 32) == 128  # 1000 elements, ~8 per thread
    assert reduction_team(TileAnalysis(total_sum(1024, 1024)), 32) == 512
    assert reduction_team(TileAnalysis(matmul(64, 64, 4096)), 32) == 1  # a contraction reuses
    assert reduction_team(TileAnalysis(column_sum(4096, 64)), 32) == 1  # strided reduce axis
    assert reduction_team(TileAnalysis(row_max(4096, 16)), 32) == 1  # too short for a warp
    t = get_target("cuda:a100")
    e = estimate(row_max(4096, 1000), TileConfig((4,), (1,), (32,)), t)
    assert e.bound == "dram" and "smem" not in e.stages  # teams read global memory directly
    assert resources(an, TileConfig((4,), (1,), (32,)), t).threads == 512


def _avx2_machine():
    facts = CpuFacts("x86_64", "test", 4, 3.0, {1: 32 << 10, 2: 1 << 20, 3: 32 << 20}, 64,
                     ("avx", "avx2", "fma"), 16 << 30)
    return cpu_target(facts, None, "gcc (test) 12")


def test_cpu_broadcast_heavy_register_tiles_are_load_bound():
    t = _avx2_machine()
    c = matmul(512, 512, 512)
    one_vector_rows = estimate(c, TileConfig((64, 64), (8, 8), (256,)), t)  # 9 loads / 8 FMAs
    two_vector_rows = estimate(c, TileConfig((64, 64), (4, 16), (256,)), t)  # 6 loads / 8 FMAs
    assert one_vector_rows.bound == "l1" and two_vector_rows.bound == "compute"
    assert two_vector_rows.time_us < one_vector_rows.time_us


def test_a_transcendental_epilogue_is_priced_per_vector_or_per_libm_call():
    from dataclasses import replace

    from compiler.ir.te import ACC, Var, call

    target = get_target("cpu")
    lanes = target.lanes
    plain = matmul(2, 4 * lanes, 512)
    gelu = replace(plain, post=call("erf", Var(ACC, "float32")))

    def compute_us(c, inner: int) -> float:
        tile = TileConfig((2, inner), (2, min(inner, 4 * lanes)), (512,), lanes)
        return estimate(c, tile, target).stages["compute"]

    # rows of outputs a vector long: the inlined vector erf; shorter: one libm call each
    vector = compute_us(gelu, 4 * lanes) - compute_us(plain, 4 * lanes)
    scalar = compute_us(gelu, lanes // 2) - compute_us(plain, lanes // 2)
    assert 0 < vector * 4 < scalar


def test_whole_short_rows_are_one_run_of_vectors_for_a_transcendental():
    """A tile that holds whole 14-wide rows of a [480, 14, 14] map holds runs of 196 (or more)
    outputs one after another, which the kernels walk as one row of vectors (merged axes,
    whole planes); a tile that cuts the rows leaves runs of 7, one libm call per output."""
    from dataclasses import replace

    from compiler.cost.model import contiguous_run
    from compiler.ir.te import call

    assert contiguous_run((240, 14, 14), (480, 14, 14)) == 240 * 196
    assert contiguous_run((1, 7, 14), (480, 14, 14)) == 98
    assert contiguous_run((240, 14, 7), (480, 14, 14)) == 7
    target = get_target("cpu")
    plain = add_relu(480, 14, 14)
    silu = replace(plain, body=plain.body * call("exp", plain.body))

    def math_us(block, thread) -> float:
        tile = TileConfig(block, thread, ())
        return estimate(silu, tile, target).stages["compute"] - estimate(plain, tile, target).stages["compute"]

    assert 0 < math_us((240, 14, 14), (1, 1, 14)) * 4 < math_us((240, 14, 7), (1, 1, 7))


def test_a_cuda_gemm_is_priced_by_the_stages_its_kernel_runs():
    """The GEMM kernel stages K `gemm_k_step` at a time (at most 32), whatever the rTile's
    reduce step: ResNet-18's 512-channel 3x3 convolution at 7x7 with a (8, 3, 3) step runs
    144 stages, each a load round trip and two barriers that one block per SM cannot hide
    (measured 212 us on an H200; priced from 64 steps of 72, the model said 42)."""
    from compiler.cost.model import STEP_LATENCY_CYCLES, clock_hz
    from compiler.cost.resources import gemm_k_step
    from compiler.schedule.cuda_tile import plan_cuda_tile
    from compiler.schedule.plan import TileConfig

    assert gemm_k_step((8, 3, 3), 4608) == 32 and gemm_k_step((3,), 3) == 4 and gemm_k_step((16,), 1000) == 16
    t = get_target("cuda:h200")
    c = conv2d(1, 512, 7, 7, 512, 3, 3, 1, 1)
    tile = plan_cuda_tile(c, TileConfig((1, 32, 4, 7), (1, 1, 1, 7), (8, 3, 3), 1))
    assert tile.launch.geometry.bk == gemm_k_step(tile.reduce_step, 4608)
    # 32 tiles, one an SM: nothing hides a stage
    assert estimate(c, tile, t).time_us >= 144 * STEP_LATENCY_CYCLES / clock_hz(t) * 1e6
