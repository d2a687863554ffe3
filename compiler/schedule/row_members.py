"""The tiles of a CPU row group's members (compiler/schedule/tilegraph/rows.py fuses the
groups), decided when the plan is built and recorded in the group's `TileConfig.members`;
compiler/codegen/c/rows.py renders each member with its tile.

A member runs on the calling thread over one block of rows (the group's tasks are the
blocks): its tile is the default tiling of the member cut to that block, with the
whole cut as one task, so only its register micro-tiles (and its loop decisions:
compiler/schedule/cpu_loops.py) remain. A last, shorter block
gets tiles of its own (the micro-tiles follow the rows there are).
"""

from __future__ import annotations

from dataclasses import replace

from compiler.ir.rows import block_rows, cut_to_rows, group_sharing
from compiler.ir.te import Compute
from compiler.schedule.cpu_loops import with_loop_decisions
from compiler.schedule.plan import TileConfig
from compiler.schedule.tiling import default_tile
from compiler.target.base import Target


def member_tiles(c: Compute, tile: TileConfig, target: Target) -> tuple[tuple[TileConfig, ...], ...]:
    """Per block of rows of group `c` tiled by `tile` (`block_rows`), each member's tile."""
    sharing = group_sharing(c)
    g = sharing.rows
    blocks = []
    for n in block_rows(c, tile.block[g - 1]):
        cuts = [cut_to_rows(m, g, n, sharing) for m in c.members()]
        blocks.append(tuple(whole_task_tile(cut, target) for cut in cuts))
    return tuple(blocks)


def whole_task_tile(cut: Compute, target: Target) -> TileConfig:
    """A group member's tile: its default micro-tiles and loop decisions, the whole cut
    one task (the group's tasks are the blocks it is cut to)."""
    return with_loop_decisions(cut, replace(default_tile(cut, target), block=cut.shape), target.lanes)
