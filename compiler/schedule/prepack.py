"""Room in the arena for the weights that CPU kernels read packed (compiler/schedule/cpu_gemm.py
decides which, compiler/codegen/c/gemm.py writes the packing functions; a depthwise
convolution's taps with channels in the lanes: compiler/codegen/c/lanes.py).

A kernel whose constant GEMM operand is packed once, at load, reads it from a
region placed after the intermediates: the entry point's `tf_prepare` fills
every region from the weights once, and `tf_run` passes each kernel its region
instead of the raw weight. The regions live as long as the arena, which the
runtime allocates once per loaded artifact.
"""

from __future__ import annotations

from compiler.schedule.arena import align_up
from compiler.schedule.lane_conv import LaneConv
from compiler.schedule.plan import ExecutionPlan, Prepack, TileConfig


def prepacked_inputs(tile: TileConfig) -> dict[int, int]:
    """Input position -> bytes, for the constant inputs that a kernel tiled by `tile` reads
    packed (its GEMM blocking says which, or its channels-in-lanes layout: its taps): the
    caller passes, at that position, memory that `<symbol>_pack<position>(dst, weight)`
    filled once."""
    if tile.gemm is not None:
        return {p.input: p.nbytes for p in tile.gemm.packed}
    if isinstance(tile.plane, LaneConv) and tile.plane.packed_taps:
        return {tile.plane.taps: tile.plane.packed_taps_floats * 4}
    return {}


def place_prepacked(plan: ExecutionPlan) -> None:
    """Give every packed kernel input of `plan` (kernels' final tiles chosen) its arena region."""
    if plan.prepacked:
        raise ValueError("the plan's prepacked regions are placed already")
    offset = align_up(plan.arena_bytes)
    for k in plan.kernels:
        for pos, nbytes in sorted(prepacked_inputs(k.tile).items()):
            plan.prepacked.append(Prepack(k.id, pos, offset, nbytes))
            offset = align_up(offset + nbytes)
    if plan.prepacked:
        plan.arena_bytes = offset
