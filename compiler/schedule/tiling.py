"""A simple default tile rule (Roller construction replaces it later).

For a reduction, the C kernel keeps a register micro-tile of accumulators:
`thread[-1]` outputs along the innermost (vector) axis times `thread[row]`
rows of one other axis. The row axis is the one the most vector loads do not
depend on, so a loaded vector is shared by every row (matmul: the rows of A
share a row of B; convolution: the output channels share a row of the input).
Rows are as many as the vector registers allow. Blocks hold a few micro-tiles
and are halved until every core has several tasks; long reductions are walked
in steps.
"""

from __future__ import annotations

import math

from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute, Load, Var, walk
from compiler.schedule.plan import TileConfig
from compiler.target.base import Target

ELEMENTWISE_BLOCK = 256
INNER_BLOCK = 64
MICRO_TILES_PER_BLOCK = 8
SPARE_REGISTERS = 4  # for the shared vector, a broadcast and temporaries
TASKS_PER_UNIT = 4
# Reduce axes longer than this are walked in steps of REDUCE_STEP (the inputs a
# pass over one tile reads then stay in L1 / L2).
LONG_REDUCE = 512
REDUCE_STEP = 256


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def default_tile(compute: Compute, target: Target) -> TileConfig:
    """A sane TileConfig for `compute` on `target`, no search."""
    n = len(compute.axes)
    ext = [max(1, a.extent) for a in compute.axes]
    vector = max(1, target.lanes * 4 // dtype(compute.dtype).nbytes)
    block, thread = [1] * n, [1] * n
    if n and not compute.is_reduction:
        block[-1] = min(ext[-1], ELEMENTWISE_BLOCK)
        thread[-1] = min(block[-1], vector)
    elif n:
        thread[-1] = _vector_width(ext[-1], vector)
        block[-1] = min(ext[-1], max(thread[-1], INNER_BLOCK // thread[-1] * thread[-1]))
        row = _row_axis(compute)
        if row is not None:
            vectors = -(-thread[-1] // vector)
            rows = max(1, (target.registers - SPARE_REGISTERS) // vectors)
            thread[row] = min(ext[row], rows)
            block[row] = min(ext[row], thread[row] * MICRO_TILES_PER_BLOCK)
    _scale_out(block, thread, ext, target.units * TASKS_PER_UNIT)
    reduce_step = tuple(REDUCE_STEP if a.extent > LONG_REDUCE else max(1, a.extent)
                        for a in compute.reduce_axes)
    return TileConfig(tuple(block), tuple(thread), reduce_step, vector)


def _vector_width(extent: int, vector: int) -> int:
    """Outputs per micro-tile row: two vectors unless one wastes less of `extent`."""
    if extent <= 2 * vector:
        return extent
    waste = {w: _ceil_to(extent, w) - extent for w in (2 * vector, vector)}
    return 2 * vector if waste[2 * vector] <= waste[vector] else vector


def _row_axis(compute: Compute) -> int | None:
    """The non-innermost spatial axis the most innermost-axis loads do not depend on."""
    names = [a.name for a in compute.axes]
    if len(names) < 2:
        return None
    deps = [{x.name for x in walk(ld) if isinstance(x, Var)}
            for ld in walk(compute.body) if isinstance(ld, Load)]
    vector_loads = [d for d in deps if names[-1] in d]
    best, best_score = None, 0
    for k in range(len(names) - 1):
        if compute.axes[k].extent < 2:
            continue
        score = sum(1 for d in vector_loads if names[k] not in d)
        if score >= best_score and score > 0:
            best, best_score = k, score
    return best


def _scale_out(block: list[int], thread: list[int], ext: list[int], want: int) -> None:
    """Halve the block with the most micro-tiles until there are `want` tasks (or none can shrink)."""
    while math.prod(-(-e // b) for e, b in zip(ext, block, strict=True)) < want:
        shrinkable = [d for d in range(len(block)) if block[d] > thread[d]]
        if not shrinkable:
            return
        d = max(shrinkable, key=lambda k: (block[k] // thread[k], -k))
        block[d] = max(thread[d], _ceil_to(block[d] // 2, thread[d]))
