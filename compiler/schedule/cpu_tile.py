"""The C backend's tile step: an rTile completed with every decision below it, so that
compiler/codegen/c/ renders the plan and decides nothing the cost model cannot see."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from compiler.ir.te import Compute
from compiler.schedule.cpu_gemm import with_gemm_blocking
from compiler.schedule.plan import TileConfig
from compiler.schedule.row_members import member_tiles
from compiler.target.base import Target


def plan_cpu_tile(compute: Compute, tile: TileConfig, target: Target,
                  constant_inputs: Collection[int] = ()) -> TileConfig:
    """`tile` with a contraction's GEMM blocking (compiler/schedule/cpu_gemm.py) and a row
    group's member tiles (compiler/schedule/row_members.py) decided for `target`;
    `constant_inputs`: the input positions holding weights (packed once at load)."""
    tile = with_gemm_blocking(compute, tile, target, constant_inputs)
    members = member_tiles(compute, tile, target) if compute.stages else ()
    return dataclasses.replace(tile, members=members)
