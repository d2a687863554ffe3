"""A simple default tile rule (Roller construction replaces it later).

Innermost spatial axis: up to 64 outputs per task, a register micro-tile of
two SIMD vectors; for reductions the next axis gets a micro-tile of 6 rows
(6 x 2 vector accumulators fill 12 of 16 AVX2 registers) and a block of 8 of
them; outer axes 1. Blocks are then halved until there are enough tasks for
every core.
"""

from __future__ import annotations

import math

from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute
from compiler.schedule.plan import TileConfig
from compiler.target.base import Target

INNER_BLOCK = 64
ROWS_PER_MICRO_TILE = 6
MICRO_TILES_PER_BLOCK = 8
TASKS_PER_UNIT = 4
MAX_REDUCE_STEP = 256


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def default_tile(compute: Compute, target: Target) -> TileConfig:
    """A sane TileConfig for `compute` on `target`, no search."""
    n = len(compute.axes)
    ext = [max(1, a.extent) for a in compute.axes]
    vector = max(1, target.lanes * 4 // dtype(compute.dtype).nbytes)
    block, thread = [1] * n, [1] * n
    if n:
        block[-1] = min(ext[-1], _round_up(INNER_BLOCK, vector))
        thread[-1] = min(block[-1], 2 * vector if compute.is_reduction else vector)
    if n >= 2 and compute.is_reduction:
        thread[-2] = min(ext[-2], ROWS_PER_MICRO_TILE)
        block[-2] = min(ext[-2], thread[-2] * MICRO_TILES_PER_BLOCK)
    _scale_out(block, thread, ext, target.units * TASKS_PER_UNIT)
    reduce_step = tuple(max(1, min(a.extent, MAX_REDUCE_STEP)) for a in compute.reduce_axes)
    return TileConfig(tuple(block), tuple(thread), reduce_step, vector)


def _scale_out(block: list[int], thread: list[int], ext: list[int], want: int) -> None:
    """Halve the block with the most micro-tiles until there are `want` tasks (or none can shrink)."""
    while math.prod(-(-e // b) for e, b in zip(ext, block, strict=True)) < want:
        shrinkable = [d for d in range(len(block)) if block[d] > thread[d]]
        if not shrinkable:
            return
        d = max(shrinkable, key=lambda k: (block[k] // thread[k], -k))
        block[d] = max(thread[d], _round_up(block[d] // 2, thread[d]))
