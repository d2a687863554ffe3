"""The tiling of a CPU convolution chain group (compiler/schedule/partition.py fuses
them): its `ChainTiling` and, per kind of task (compiler/ir/chain.py `task_kinds`), each
member's tile, decided when the plan is built; compiler/codegen/c/chain.py renders them."""

from __future__ import annotations

from dataclasses import replace

from compiler.cost.model import Estimate, group_bytes
from compiler.ir.chain import chain_shape, cut_member, task_kinds
from compiler.ir.te import Compute
from compiler.schedule.cpu_gemm import MIN_KC, with_gemm_blocking
from compiler.schedule.partition import is_chain_group, plan_chain
from compiler.schedule.plan import TileConfig
from compiler.schedule.row_members import whole_task_tile
from compiler.target.base import Target


def with_chain_tiling(c: Compute, tile: TileConfig, target: Target) -> TileConfig | None:
    """`tile` with the chain's split, tile rows and order and its members' tiles per task
    kind; None where `c` is no chain group that runs depth-first."""
    if not is_chain_group(c):
        return None
    chain = plan_chain(c, target)
    shape = chain_shape(c)
    if chain is None or shape is None or not chain.depth_first:
        return None
    kinds, _ = task_kinds(shape, chain.rows)
    members = tuple(tuple(member_tile(cut_member(c, shape, k, kind.spans), target)
                          for k in range(len(c.stages) + 1)) for kind in kinds)
    return replace(tile, chain=chain, members=members, gemm=None)


def member_tile(cut: Compute, target: Target) -> TileConfig:
    """A chain member's tile on the calling thread: a contraction the packed GEMM takes
    gets its blocking (every operand packed per task: the weights are the group's inputs,
    not the member's), the rest their loop nest."""
    tile = whole_task_tile(cut, target)
    # blocked for the one core that runs it (the chain's tasks, not its blocks, fill the cores)
    gemm = with_gemm_blocking(cut, tile, target.with_units(1)).gemm
    # a shallow reduction spends more on packing and on storing C than on FMAs, where
    # the loop nest keeps its outputs in registers (MBConv's expansions: K = 24, 40)
    if gemm is None or gemm.k < MIN_KC:
        return tile
    return replace(tile, gemm=gemm)


def chain_candidate(c: Compute, target: Target) -> tuple[TileConfig, Estimate]:
    """A chain group's one rTile (its tiling below is `with_chain_tiling`'s) and what the
    model predicts: its inputs and output cross DRAM once (the stages meet in L2), its
    compute is every member's FLOPs."""
    tile = TileConfig(c.shape, (1,) * len(c.axes), (1,) * len(c.reduce_axes))
    dram = group_bytes(c) / target.levels[0].bandwidth * 1e6
    compute = c.flops() / max(target.peak_flops.values()) * 1e6
    stages = {"dram": dram, "compute": compute}
    bound = max(stages, key=lambda k: stages[k])
    return tile, Estimate(stages[bound], stages, bound, 1, 1)
