"""The tiling of a CPU convolution chain group (compiler/schedule/partition.py fuses
them): its `ChainTiling` and, per kind of task (compiler/ir/chain.py `task_kinds`), each
member's tile, decided when the plan is built; compiler/codegen/c/chain.py renders them."""

from __future__ import annotations

import math
from dataclasses import replace

from compiler.cost.model import Estimate, estimate, group_bytes
from compiler.ir.chain import chain_shape, cut_member, task_kinds
from compiler.ir.te import Compute
from compiler.schedule.cpu_gemm import MIN_KC, l1_bytes, with_gemm_blocking
from compiler.schedule.parallel import runs_serially
from compiler.schedule.partition import is_chain_group, plan_chain, runs_as_chain
from compiler.schedule.per_channel import planned_per_channel
from compiler.schedule.plan import TileConfig
from compiler.schedule.row_members import whole_task_tile
from compiler.target.base import MemoryLevel, Target

# Of a core's L2, what an intermediate's share may fill and still be there when the next
# kernel reads it (its producer's inputs and the weights share the rest).
L2_RESIDENT = 0.5


def with_chain_tiling(c: Compute, tile: TileConfig, target: Target) -> TileConfig | None:
    """`tile` with the chain's split, tile rows and order and its members' tiles per task
    kind; None where `c` is no chain group that runs as one (`runs_as_chain`)."""
    if not is_chain_group(c):
        return None
    chain, shape = plan_chain(c, target), chain_shape(c)
    if chain is None or shape is None or not runs_as_chain(c, target, chain):
        return None
    kinds, _ = task_kinds(shape, chain.rows)
    members = tuple(tuple(member_tile(cut_member(c, shape, k, kind.spans), target)
                          for k in range(len(c.stages) + 1)) for kind in kinds)
    return replace(tile, chain=chain, members=members, gemm=None, serial=runs_serially(c))


def member_tile(cut: Compute, target: Target) -> TileConfig:
    """A chain member's tile on the calling thread: a per-channel convolution's planes
    where they cost less than its micro-tiles (as for a kernel of its own:
    compiler/schedule/plane_conv.py), else its loop nest, or the packed GEMM (every
    operand packed per task: the weights are the group's inputs, not the member's)
    where that is the better register tile. The loop nest reads its operands in place
    and keeps its outputs in registers; the GEMM pays for packing and a round trip of C
    through scratch, so it is taken only for a deep reduction whose loop tile holds fewer
    accumulators than the micro-kernel, or where the loop nest has no register tile at all:
    rows narrower than a vector run scalar, their accumulators an array in memory
    (compiler/codegen/c/kernel.py; ShuffleNetV2's 14 x 14 pointwise convolutions on
    AVX-512 ran 4x slower than as a GEMM)."""
    tile = whole_task_tile(cut, target)
    plane = planned_per_channel(cut, tile.vector, target.lanes, l1_bytes(target))
    if plane is not None:
        return replace(tile, plane=plane)
    # blocked for the one core that runs it (the chain's tasks, not its blocks, fill the cores)
    gemm = with_gemm_blocking(cut, tile, target.with_units(1)).gemm
    loops_win = gemm is None or gemm.k < MIN_KC or _accumulators(tile, target) >= gemm.mk.rows * gemm.mk.vectors
    if gemm is None or (loops_win and not _runs_scalar(tile)):
        return tile
    return replace(tile, gemm=gemm)


def _runs_scalar(tile: TileConfig) -> bool:
    """Whether a loop nest's rows are narrower than a vector: c/kernel.py then runs them
    scalar, the register tile's accumulators an array in memory."""
    return bool(tile.thread) and tile.thread[-1] < tile.vector


def _accumulators(tile: TileConfig, target: Target) -> int:
    """Vector registers a loop nest's register tile accumulates in."""
    inner = tile.thread[-1] if tile.thread else 1
    return math.prod(tile.thread[:-1]) * -(-inner // target.lanes)


def chain_candidate(c: Compute, target: Target) -> tuple[TileConfig, Estimate]:
    """A chain group's one rTile (its tiling below is `with_chain_tiling`'s) and what the
    model predicts for what the kernel runs: its inputs and output cross DRAM once (the
    stages meet in L2); its tasks run every member, on the member's own tile (loop nest
    or GEMM), over the member's rows of the tile plus halo, one core per task."""
    tile = TileConfig(c.shape, (1,) * len(c.axes), (1,) * len(c.reduce_axes))
    stages = {"dram": group_bytes(c) / target.levels[0].bandwidth * 1e6}
    planned, shape = with_chain_tiling(c, tile, target), chain_shape(c)
    if planned is None or planned.chain is None or shape is None:  # never made: fusion refuses it
        stages["compute"] = c.flops() / max(target.peak_flops.values()) * 1e6
        tasks = 1
    else:
        kinds, table = task_kinds(shape, planned.chain.rows)
        one_core = target.with_units(1)
        task_us = [sum(_member_us(cut_member(c, shape, k, kind.spans), t, one_core)
                       for k, t in enumerate(tiles)) for kind, tiles in zip(kinds, planned.members, strict=True)]
        tasks = shape.batch * len(table)
        # static tasks: the cores take equal shares, the last wave runs partly empty
        stages["tasks"] = sum(task_us[v] for v in table) * shape.batch / tasks * -(-tasks // target.units)
    bound = max(stages, key=lambda k: stages[k])
    return tile, Estimate(stages[bound], stages, bound, tasks, -(-tasks // target.units))


def _member_us(cut: Compute, tile: TileConfig, one_core: Target) -> float:
    """One task's run of a member on one core: its slowest stage inside the core (what it
    reads and writes is the task's scratch, or group inputs the DRAM stage counts), then
    the packing of its operands where it runs as a GEMM; a reduction whose rows run scalar
    (`_runs_scalar`) at no more than one lane of the core's peak."""
    e = estimate(cut, tile, one_core)
    inner = max((v for k, v in e.stages.items() if k not in ("dram", "l3")), default=0.0)
    if cut.is_reduction and tile.gemm is None and tile.plane is None and _runs_scalar(tile):
        # one lane of the core's peak: a 1152 -> 192 projection on 2 x 7 rows ran at 17 of
        # a core's 238 GFLOP/s, where the cost model, pricing masked vectors, expected 4x that
        inner = max(inner, cut.flops() * one_core.lanes / max(one_core.peak_flops.values()) * 1e6)
    return inner + _packing_us(tile, one_core)


def _packing_us(tile: TileConfig, one_core: Target) -> float:
    """A GEMM member packs its operands in every task (a chain's weights are its group's
    inputs, never packed at load; A once per block of `nc` columns): each read and written
    once more, at the bandwidth of the level that holds it. Unpriced, a 1x1 projection of
    1152 channels on a 7x7 map, its 884 KB of weights packed by each task of a row or two,
    ran 3x slower than apart, and the model kept it."""
    g = tile.gemm
    if g is None:
        return 0.0
    direct = g.direct.side if g.direct is not None else None
    a = 0 if direct == "a" else g.m * g.k * -(-g.n // g.nc)
    b = 0 if direct == "b" else g.k * g.n
    nbytes = 4 * g.batch * (a + b)
    return 2 * nbytes / resident_level(nbytes, one_core).bandwidth * 1e6


def resident_level(per_core_bytes: int, target: Target, total_bytes: int | None = None) -> MemoryLevel:
    """Where `per_core_bytes` a core wrote are when it (or the next kernel) reads them
    again: its L2 where they fill at most `L2_RESIDENT` of it, else the first shared cache
    that holds `total_bytes` (all cores' share; default the one core's), else DRAM."""
    l2 = target.level("l2")
    if per_core_bytes <= L2_RESIDENT * l2.capacity:
        return l2
    total = per_core_bytes if total_bytes is None else total_bytes
    fits = [lv for lv in target.levels[1:] if lv.shared and total <= lv.capacity]
    return fits[0] if fits else target.levels[0]


def chain_prices(c: Compute, target: Target) -> tuple[float, float]:
    """Predicted microseconds of chain group `c` and of its members run one after another
    (breadth-first), priced alike: each member on its own tile, its work shared by the
    cores; the chain recomputes its halos but keeps its intermediates in L2, where the
    members apart write each intermediate once and read it once more from the level it
    fits (each core's L2 where its share stays there, else the last-level cache, else DRAM)."""
    fused = chain_candidate(c, target)[1].time_us
    one_core = target.with_units(1)
    inner = sum(_member_us(m, member_tile(m, target), one_core) for m in c.members()) / target.units
    spill = 0.0
    for m in c.members()[:-1]:
        nbytes = m.nbytes
        level = resident_level(nbytes // target.units, target, nbytes)  # each core wrote its share
        spill += 2 * nbytes / level.bandwidth * 1e6
    return fused, max(group_bytes(c) / target.levels[0].bandwidth * 1e6, inner) + spill
