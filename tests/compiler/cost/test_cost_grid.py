"""Warps and waves: the box consecutive grid points cover."""

from te_operators import matmul

from compiler.cost import TileAnalysis
from compiler.cost.grid import row_major_span
from compiler.cost.model import wave_tile
from compiler.cost.resources import warp_tile
from compiler.schedule.plan import TileConfig


def test_row_major_span():
    assert row_major_span((16, 32), 32) == (1, 32)
    assert row_major_span((16, 8), 32) == (4, 8)
    assert row_major_span((16, 12), 32) == (3, 12)  # 32 points touch 3 partial rows
    assert row_major_span((2, 2), 32) == (2, 2)  # fewer points than asked
    assert row_major_span((), 32) == ()


def test_warp_tile_is_register_tiles_of_one_warp():
    assert warp_tile(TileConfig((128, 128), (8, 8), (32,)), 32) == (16, 128)
    assert warp_tile(TileConfig((64, 256), (4, 8), (32,)), 32) == (4, 256)


def test_wave_tile_covers_the_concurrent_tiles():
    an = TileAnalysis(matmul(1024, 1024, 64))
    assert wave_tile(an, (128, 128), 8) == (128, 1024)
    assert wave_tile(an, (128, 128), 20) == (384, 1024)
    assert wave_tile(an, (128, 128), 1000) == (1024, 1024)
