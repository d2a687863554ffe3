"""The C backend's tile step: an rTile completed with every decision below it, so that
compiler/codegen/c/ renders the plan and decides nothing the cost model cannot see."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from compiler.ir.te import Compute
from compiler.schedule.chain_members import with_chain_tiling
from compiler.schedule.cpu_gemm import gemm_variants, l1_bytes, with_gemm_blocking
from compiler.schedule.cpu_loops import with_loop_decisions
from compiler.schedule.parallel import runs_serially
from compiler.schedule.per_channel import PerChannel, per_channel_choices, planned_per_channel
from compiler.schedule.plan import TileConfig
from compiler.schedule.row_members import member_tiles
from compiler.schedule.row_softmax import is_row_softmax
from compiler.target.base import Target


def plan_cpu_tile(compute: Compute, tile: TileConfig, target: Target,
                  constant_inputs: Collection[int] = ()) -> TileConfig:
    """`tile` with every decision below the rTile made for `target`: a contraction's GEMM
    blocking (compiler/schedule/cpu_gemm.py); a row group's member tiles
    (compiler/schedule/row_members.py) and path (compiler/schedule/row_softmax.py); a
    convolution chain's tiles (compiler/schedule/chain_members.py); a per-channel
    convolution's planes or lanes (compiler/schedule/per_channel.py); the loops of any other kernel
    (compiler/schedule/cpu_loops.py); and whether it runs in parallel
    (compiler/schedule/parallel.py). `constant_inputs`: the input positions holding weights
    (packed once at load)."""
    if tile.attention:  # an attention group's blocks are all it decides
        return dataclasses.replace(tile, serial=runs_serially(compute))
    chain = with_chain_tiling(compute, tile, target) if compute.stages else None
    if chain is not None:
        return chain
    tile = with_gemm_blocking(compute, tile, target, constant_inputs)
    if compute.stages:
        tile = dataclasses.replace(tile, members=member_tiles(compute, tile, target),
                                   row_softmax=is_row_softmax(compute))
    elif tile.gemm is None:
        plane = planned_per_channel(compute, tile.vector, target.lanes, l1_bytes(target), constant_inputs)
        tile = _with_loops(compute, tile, target, plane)
    return dataclasses.replace(tile, serial=runs_serially(compute))


def _with_loops(compute: Compute, tile: TileConfig, target: Target, plane: PerChannel | None) -> TileConfig:
    """`tile` computed as per-channel layout `plane` says, or on micro-tiles with its loops
    decided (None)."""
    return dataclasses.replace(tile, plane=plane) if plane is not None else with_loop_decisions(
        compute, tile, target.lanes)


def cpu_tile_variants(compute: Compute, tile: TileConfig, target: Target,
                      constant_inputs: Collection[int] = ()) -> list[tuple[float, TileConfig]]:
    """The other ways to run rTile `tile` on `target`, each complete as `plan_cpu_tile`
    leaves a tile, with its predicted time relative to `plan_cpu_tile`'s: a contraction's
    other GEMM orientations (compiler/schedule/cpu_gemm.py `gemm_variants`), a per-channel
    convolution's planes, lanes or micro-tiles, whichever the model did not pick
    (compiler/schedule/per_channel.py `per_channel_choices`: its costs were measured on AVX-512)."""
    if tile.attention or compute.stages:
        return []
    gemm = gemm_variants(compute, tile, target, constant_inputs)
    ways = gemm[1:] if gemm else [
        (relative, _with_loops(compute, tile, target, plane))
        for relative, plane in per_channel_choices(compute, tile.vector, target.lanes, l1_bytes(target), constant_inputs)[1:]]
    return [(relative, dataclasses.replace(t, serial=runs_serially(compute))) for relative, t in ways]
