"""The loop decisions of a CPU kernel off the packed-GEMM path (one Compute, or one member
of a row group), recorded in its tile: whether a reduction takes the row-reduction path
(compiler/schedule/row_reduction.py) and, on micro-tiles, the reduce chunk
(compiler/schedule/reduce_chunk.py) and the staged block (compiler/schedule/stage_block.py). compiler/codegen/c/kernel.py renders
them on the same view of the kernel: reduce axes merged (compiler/schedule/merge_axes.py),
block and micro-tile clipped to the extents."""

from __future__ import annotations

import dataclasses
import math

from compiler.ir.te import Compute
from compiler.schedule.merge_axes import merge_reduce_axes
from compiler.schedule.plan import TileConfig
from compiler.schedule.reduce_chunk import reduce_chunk
from compiler.schedule.row_reduction import reduces_rows
from compiler.schedule.stage_block import staged_block


def with_loop_decisions(c: Compute, tile: TileConfig, lanes: int) -> TileConfig:
    """`tile` with `row_reduction`, `chunk` and `stage` decided for `c`'s loop nest on a
    target of `lanes` SIMD lanes (a row reduction neither chunks nor stages: it walks each
    output's row on its own)."""
    if math.prod(c.shape) == 0:
        return tile
    merged, t = merge_reduce_axes(c, tile)
    block = [max(1, min(b, a.extent)) for b, a in zip(t.block, merged.axes, strict=True)]
    thread = [max(1, min(u, b)) for u, b in zip(t.thread, block, strict=True)]
    if reduces_rows(merged, t.vector, lanes):
        return dataclasses.replace(tile, row_reduction=True)
    chunk = reduce_chunk(merged, block, t.reduce_step)
    stage = staged_block(merged, block, thread) if merged.is_reduction and not chunk else ()
    return dataclasses.replace(tile, chunk=chunk, stage=stage)
