"""CUDA tile shapes for contractions (which Computes qualify: compiler/ir/contraction.py).

The rows side is staged along the slow thread index, the cols side along the fast one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.codegen.cuda.parts import (
    MAX_GRID,
    MAX_THREADS,
    ceil_div,
    pow2_at_least,
    pow2_at_most,
)
from compiler.ir.contraction import Contraction, side_extent
from compiler.ir.te import Compute
from compiler.schedule.plan import TileConfig

_GEMM_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
SMEM_LIMIT = 48 * 1024  # static shared memory per block without opting in
MAX_TILE = 256
MIN_THREADS = 128  # per block, when the register tile can shrink to reach it


@dataclass(frozen=True)
class GemmGeometry:
    """Block tile (bm x bn outputs, bk deep) and register tile (tm x tn) per thread."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)


def gemm_geometry(c: Compute, m: Contraction, tile: TileConfig) -> GemmGeometry:
    """The TileConfig's tiles on the GEMM's sides, made legal: powers of two, register
    tile at most 8 x 8 (smaller when that is what it takes to reach 128 threads),
    32..1024 threads where the sizes allow, shared memory under 48 KB."""
    big_m, big_n = side_extent(c, m.rows), side_extent(c, m.cols)
    big_k = math.prod(a.extent for a in c.reduce_axes)
    elem = _GEMM_BYTES[c.acc_dtype]
    tm = pow2_at_most(min(8, math.prod(tile.thread[d] for d in m.rows)))
    tn = pow2_at_most(min(8, math.prod(tile.thread[d] for d in m.cols)))
    tm, tn = min(tm, pow2_at_least(big_m)), min(tn, pow2_at_least(big_n))
    bm = max(tm, min(pow2_at_most(math.prod(tile.block[d] for d in m.rows)), MAX_TILE,
                     pow2_at_least(big_m)))
    bn = max(tn, min(pow2_at_most(math.prod(tile.block[d] for d in m.cols)), MAX_TILE,
                     pow2_at_least(big_n)))
    bk = max(4, min(32, pow2_at_most(math.prod(tile.reduce_step)), pow2_at_least(big_k)))
    # Too few threads hide no latency: give up register tile before block tile.
    while (bm // tm) * (bn // tn) < MIN_THREADS and max(tm, tn) > 2:
        if tm >= tn:
            tm //= 2
        else:
            tn //= 2
    while (bm // tm) * (bn // tn) > MAX_THREADS:
        if bm // tm >= bn // tn:
            bm //= 2
        else:
            bn //= 2
    while (bm // tm) * (bn // tn) < 32 and (bm < big_m or bn < big_n):
        if bn < big_n:
            bn *= 2
        else:
            bm *= 2
    while bk * (bm + bn + 2) * elem > SMEM_LIMIT and bk > 4:
        bk //= 2
    while bk * (bm + bn + 2) * elem > SMEM_LIMIT:
        bm, bn = max(tm, bm // 2), max(tn, bn // 2)
    return GemmGeometry(bm, bn, bk, tm, tn)


def gemm_launch(c: Compute, m: Contraction, g: GemmGeometry) -> tuple[tuple[int, int, int],
                                                                      tuple[int, int, int]]:
    tiles = (side_extent(c, m.batch) * ceil_div(side_extent(c, m.rows), g.bm)
             * ceil_div(side_extent(c, m.cols), g.bn))
    return (max(1, min(tiles, MAX_GRID)), 1, 1), (g.threads, 1, 1)
