"""Generated CUDA kernels agree with the TE interpreter, run on the CPU emulator (no GPU
needed), and the source follows the launch the plan records (the kinds and launches
themselves: tests/compiler/schedule/test_cuda_tile.py)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from cuda_cases import ALL_CASES, GPU, check_close, tile_for
from cuda_emulator import EmulatedKernels
from test_c_kernels import conv2d, matmul, row_reduce

from compiler.codegen.cuda.kernel import render_kernel
from compiler.codegen.cuda.parts import decompose
from compiler.ir.interp import evaluate
from compiler.ir.te import Axis, Compute, Load, TensorType, Var
from compiler.schedule.cuda_launch import MAX_GRID, CudaLaunch, GemmGeometry
from compiler.schedule.cuda_tile import plan_cuda_tile
from compiler.schedule.plan import TileConfig
from compiler.schedule.rtile import construct

ROLLER = {"roller_matmul": matmul(96, 80, 64), "roller_conv": conv2d(1, 1, 1),
          "roller_rows": row_reduce("sum", 8, 300)}

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> EmulatedKernels:
    kernels = {f"k{n}": (case[0], tile_for(case)) for n, case in enumerate(ALL_CASES.values())}
    kernels |= {name: (c, construct(c, GPU)[0].tile) for name, c in ROLLER.items()}
    kernels["unaligned"] = kernels[f"k{list(ALL_CASES).index('gemm_vector_loads')}"]
    return EmulatedKernels(kernels, Path(tmp_path_factory.mktemp("cuda_emulated")))


@pytest.mark.parametrize("name", list(ALL_CASES))
def test_kernel_matches_interpreter(emulated: EmulatedKernels, name: str) -> None:
    compute, _, make_inputs = ALL_CASES[name]
    inputs = make_inputs()
    check_close(emulated.run(f"k{list(ALL_CASES).index(name)}", inputs), evaluate(compute, inputs), compute)


@pytest.mark.parametrize("name", list(ROLLER))
def test_roller_tiles_run(emulated: EmulatedKernels, name: str) -> None:
    c = ROLLER[name]
    inputs = [np.random.default_rng(3).standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    check_close(emulated.run(name, inputs), evaluate(c, inputs), c)


def test_unaligned_operands_fall_back_to_scalar_loads(emulated: EmulatedKernels) -> None:
    c, _, make_inputs = ALL_CASES["gemm_vector_loads"]
    assert "float4" in render_kernel(c, tile_for(ALL_CASES["gemm_vector_loads"]), "k")
    # views one element into a larger buffer: 4-byte but not 16-byte aligned
    shifted = []
    for x in make_inputs():
        buf = np.empty(x.size + 1, np.float32)
        buf[1:] = x.reshape(-1)
        shifted.append(buf[1:].reshape(x.shape))
    assert shifted[0].ctypes.data % 16
    check_close(emulated.run("unaligned", shifted), evaluate(c, shifted), c)


def test_the_source_follows_the_planned_launch(tmp_path: Path) -> None:
    """Codegen decides nothing: another GEMM geometry in the plan (with its launch) is the
    one the source runs, and it still computes the product."""
    c = matmul(64, 48, 40)
    tile = plan_cuda_tile(c, TileConfig((64, 48), (4, 4), (8,)))
    assert tile.launch is not None and tile.launch.geometry != GemmGeometry(32, 16, 8, 2, 2, True, True)
    other = CudaLaunch("gemm", GemmGeometry(32, 16, 8, 2, 2, True, True), (6, 1, 1), (128, 1, 1))  # 2 x 3 tiles
    src = render_kernel(c, dataclasses.replace(tile, launch=other), "k")
    assert src != render_kernel(c, tile, "k")
    assert "__launch_bounds__(128)" in src and "sa[8][33]" in src and "sb[8][17]" in src
    kernels = EmulatedKernels({"k": (c, dataclasses.replace(tile, launch=other))}, tmp_path)
    inputs = [np.random.default_rng(5).standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    check_close(kernels.run("k", inputs), evaluate(c, inputs), c)


# (compute, rTile, the planned prefetches of the rows and cols operands)
PREFETCH_CASES = {"both_prefetched": (matmul(64, 48, 40), TileConfig((64, 48), (4, 4), (8,)), (True, True)),
                  "rows_copied": (matmul(128, 64, 64), TileConfig((128, 64), (8, 8), (32,)), (False, True))}


@pytest.mark.parametrize("name", list(PREFETCH_CASES))
def test_the_source_follows_the_planned_prefetches(tmp_path: Path, name: str) -> None:
    """Whether a GEMM operand is prefetched through registers is the plan's
    (GemmGeometry.prefetch_a / prefetch_b): flipped, the source changes and still computes
    the product; the geometry's JSON writes a prefetch only where it departs from the rule."""
    c, rtile, planned = PREFETCH_CASES[name]
    tile = plan_cuda_tile(c, rtile)
    assert tile.launch is not None and isinstance(tile.launch.geometry, GemmGeometry)
    g = tile.launch.geometry
    assert (g.prefetch_a, g.prefetch_b) == planned
    assert set(tile.launch.to_json()["geometry"]) == {"bm", "bn", "bk", "tm", "tn"}
    flipped = dataclasses.replace(tile, launch=dataclasses.replace(
        tile.launch, geometry=dataclasses.replace(g, prefetch_a=not g.prefetch_a)))
    assert flipped.to_json()["launch"]["geometry"]["prefetch_a"] is not g.prefetch_a
    assert TileConfig.from_json(flipped.to_json()) == flipped and TileConfig.from_json(tile.to_json()) == tile
    src, planned_src = render_kernel(c, flipped, "k"), render_kernel(c, tile, "k")
    assert ("ar[" in planned_src) is g.prefetch_a and ("ar[" in src) is not g.prefetch_a
    assert ("br[" in src) is g.prefetch_b
    kernels = EmulatedKernels({"k": (c, flipped)}, tmp_path)
    inputs = [np.random.default_rng(7).standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    check_close(kernels.run("k", inputs), evaluate(c, inputs), c)


def test_huge_elementwise_is_covered_grid_stride() -> None:
    n = 1 << 33
    c = Compute((Axis("i0", n),), Load(0, (Var("i0"),), "float32") * 2.0,
                (TensorType((n,), "float32"),), "float32")
    tile = plan_cuda_tile(c, TileConfig((256,), (4,), ()))
    assert tile.launch is not None and tile.launch.grid[0] == MAX_GRID
    assert tile.launch.block[0] == 64  # 256 outputs, 4 per thread
    assert "tile += gridDim.x" in render_kernel(c, tile, "k")


def test_source_has_only_generated_identifiers() -> None:
    c = Compute((Axis("secret_axis", 4),), Load(0, (Var("secret_axis"),), "float32") * 2.0,
                (TensorType((4,), "float32"),), "float32", label="Evil; system(rm)")
    src = render_kernel(c, plan_cuda_tile(c, TileConfig((4,), (1,), ())), "tf_0123abcd")
    assert "secret" not in src and "Evil" not in src and "system" not in src
    assert ('extern "C" __global__ void __launch_bounds__(4) '
            "tf_0123abcd(float* __restrict__ out, const float* __restrict__ in0)") in src


def test_bad_symbol_or_tile_is_refused() -> None:
    c = matmul(4, 4, 4)
    with pytest.raises(ValueError, match="identifier"):
        render_kernel(c, plan_cuda_tile(c, TileConfig((4, 4), (1, 1), (4,))), "x; int y")
    with pytest.raises(ValueError, match="axes"):
        plan_cuda_tile(c, TileConfig((4,), (1,), (4,)))
    with pytest.raises(ValueError, match="positive"):
        plan_cuda_tile(c, TileConfig((4, 0), (1, 1), (4,)))
    with pytest.raises(ValueError, match="no CUDA launch"):  # a tile the plan never completed
        render_kernel(c, TileConfig((4, 4), (1, 1), (4,)), "k")


def test_index_splitting_is_32_bit_only_where_it_cannot_overflow() -> None:
    small = "\n".join(decompose("flat", ["a", "b"], [1000, 1000], ""))
    big = "\n".join(decompose("flat", ["a", "b"], [1 << 20, 1 << 20], ""))
    assert "const int b = b_f % 1000;" in small and "long long" not in small
    assert "const long long b = flat % 1048576;" in big and "int " not in big
