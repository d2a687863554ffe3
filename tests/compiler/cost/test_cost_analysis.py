"""TileAnalysis answers with the TE analyses' numbers."""

import pytest
from te_operators import conv2d, gather_rows, matmul, row_mean

from compiler.cost import TileAnalysis
from compiler.cost.analysis import live_loads
from compiler.ir import te
from compiler.ir.te import Var, call, select


@pytest.mark.parametrize("compute", [matmul(96, 80, 64), conv2d(1, 8, 12, 12, 16, 3, 3, 1, 1),
                                     row_mean(32, 48)], ids=["matmul", "conv", "mean"])
def test_affine_computes_match_te_exactly(compute):
    an = TileAnalysis(compute)
    spatial = tuple(min(8, e) for e in an.extents)
    step = tuple(min(4, e) for e in an.reduce_extents)
    tile = an.tile(spatial, step)
    assert an.footprint(spatial, step) == te.footprint(compute, tile)
    for tx in (4, 32, 64):
        assert an.traffic(spatial, tx) == te.traffic(compute, an.tile(spatial), tx)
    assert an.tiles(spatial) == te.num_tiles(compute, tile)
    assert an.compulsory(32) == te.traffic(compute, te.full_tile(compute), 32).per_tile


def test_data_dependent_region_is_capped_by_touched_elements():
    c = gather_rows(30000, 64, 16)
    an = TileAnalysis(c)
    # te says a tile may read the whole table; 2 rows x 64 columns touch 128 elements.
    assert te.region_of(c, an.tile((2, 64)))[0] == [(0, 29999), (0, 63)]
    assert an.input_elems((2, 64)) == [128, 2]
    assert an.traffic((2, 64), 64).per_tile < 30000 * 64 * 4


def test_memo_returns_the_same_answers():
    an = TileAnalysis(matmul(64, 64, 64))
    first = an.traffic((16, 16), 32)
    assert an.traffic((16, 16), 32) is first


def test_a_select_by_the_output_index_loads_its_larger_branch():
    """The C kernels run each range of such a select with its own branch: what a tile
    holds in registers is one branch's loads, not the chain's (Winograd's 36 positions)."""
    i0, i1 = Var("i0"), Var("i1")
    x = [te.Load(0, (i0, i1 + k), "float32") for k in range(4)]
    by_index = select(call("lt", i0, 2), x[0] + x[1] + x[2], x[3] * 2.0 - x[0])
    assert live_loads(by_index) == {0: 3}
    by_value = select(call("lt", x[3], 0.0), x[0] + x[1], x[2])  # a condition that loads: all run
    assert live_loads(by_value) == {0: 4}
