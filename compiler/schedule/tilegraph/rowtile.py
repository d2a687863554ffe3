"""Tiles of fused row groups (compiler/schedule/tilegraph/rows.py): rows per task.

A group's only tiling choice is how many rows of its innermost row axis one task
takes (`TileConfig.block[rows - 1]`; every other row axis 1, the rest whole):
powers of two up to the axis, while a block's working set (every row-indexed
tensor of every member) fits half of L2, so the stages' scratch the later members
read is still in cache. The cost model ranks them: more rows per task means fewer
task start-ups, fewer means more tasks to spread over the cores and a working set
that may fit L1.
"""

from __future__ import annotations

from compiler.cost.model import Estimate, estimate_row_group
from compiler.cost.resources import simd_lanes
from compiler.ir.dtypes import dtype
from compiler.ir.rows import group_sharing, row_bytes
from compiler.ir.te import Compute
from compiler.schedule.plan import TileConfig
from compiler.target.base import Target

MAX_ROW_BLOCK = 1 << 12


def row_group_tilings(c: Compute, target: Target, top_k: int) -> list[tuple[TileConfig, Estimate]]:
    """The `top_k` tilings of fused group `c` the model predicts fastest, with its estimates."""
    sharing = group_sharing(c)
    g, extent = sharing.rows, c.shape[sharing.rows - 1]
    budget = target.level("l2").capacity // 2
    per_row = row_bytes(c, sharing)
    # A GPU runs a group one row per thread block (compiler/codegen/cuda/rows.py).
    sizes = [1] if target.kind == "cuda" else sorted({min(extent, 1 << k) for k in range(MAX_ROW_BLOCK.bit_length())})
    vector = 1 if target.kind == "cuda" else simd_lanes(target, dtype(c.dtype).nbytes)
    ranked = []
    for b in (b for b in sizes if b == 1 or b * per_row <= budget):
        tile = TileConfig((1,) * (g - 1) + (b,) + c.shape[g:], (1,) * len(c.axes), (1,) * len(c.reduce_axes), vector)
        ranked.append((tile, estimate_row_group(c, sharing, b, target)))
    ranked.sort(key=lambda x: x[1].time_us)
    return ranked[:max(1, top_k)]
