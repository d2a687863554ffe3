"""CUDA kernel shapes and launches (compiler/schedule/cuda_tile.py): which kind each
Compute gets, and a legal launch from any tile."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compiler.ir.te import Compute
from compiler.schedule.cuda_launch import MAX_GRID, MAX_THREADS, WARP, GemmGeometry
from compiler.schedule.cuda_tile import SMEM_LIMIT, attention_geometry, cuda_launch
from compiler.schedule.plan import TileConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))  # the kernels' cases
from cuda_cases import tile_for
from test_c_kernels import conv2d, depthwise, matmul, maxpool, row_reduce


@pytest.mark.parametrize(("compute", "kind"), [
    (matmul(64, 64, 64), "gemm"), (conv2d(2, 1, 1), "gemm"), (depthwise(), "general"),
    (maxpool(), "general"), (row_reduce("max", 4, 300), "rowreduce"),
    (row_reduce("max", 4, 8), "general"),
])
def test_kernel_kind(compute: Compute, kind: str) -> None:
    assert cuda_launch(compute, tile_for((compute, None, None))).kind == kind


@pytest.mark.parametrize("tile", [
    TileConfig((4096, 4096), (64, 64), (1024,)), TileConfig((1, 1), (1, 1), (1,)),
    TileConfig((3, 5000), (7, 1), (3,)),
])
@pytest.mark.parametrize("compute", [matmul(2000, 3000, 500, "float64"), matmul(3, 5000, 7)])
def test_any_tile_gives_a_legal_launch(compute: Compute, tile: TileConfig) -> None:
    launch = cuda_launch(compute, tile)
    (grid, gy, gz), (block, by, bz) = launch.grid, launch.block
    assert 1 <= grid <= MAX_GRID and 1 <= block <= MAX_THREADS and gy == gz == by == bz == 1
    g = launch.geometry
    assert isinstance(g, GemmGeometry)
    assert g.bk * (g.bm + g.bn + 2) * 8 <= SMEM_LIMIT and g.tm * g.tn <= 64


@pytest.mark.parametrize("blocks", [(64, 128, 4), (1, 1, 1), (3, 20, 8), (512, 64, 1), (16, 32, 2)])
def test_any_attention_blocks_give_legal_geometry(blocks: tuple[int, int, int]) -> None:
    """Whatever (query rows, keys, rows per thread) an attention tile names (a CPU one
    included), the geometry is whole warps of teams within a warp, every thread with
    whole rows, keys a whole number of team widths."""
    g = attention_geometry(*blocks)
    assert g.threads % WARP == 0 and WARP <= g.threads <= MAX_THREADS
    assert WARP % g.team == 0 and g.bq % g.rows == 0 and g.bk % g.team == 0
    assert g.bq >= blocks[0] and g.bk >= blocks[1]
