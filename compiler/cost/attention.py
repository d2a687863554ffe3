"""Footprint and predicted time of a fused attention group (compiler/ir/attention.py) run in
blocks of query rows, each walking the keys in blocks with the online softmax."""

from __future__ import annotations

import math

from compiler.cost.model import (
    TASK_OVERHEAD_CYCLES,
    Estimate,
    clock_hz,
    finish,
    wave_utilisation,
)
from compiler.ir.attention import Attention
from compiler.target.base import Target

_F32 = 4
_PACK_CYCLES = 1.0  # per element of a task's queries copied transposed (scalar, strided)
_ROW_STEP_CYCLES = 12  # per query row and key block: the running max, sum and rescale


def attention_footprint(a: Attention, query_block: int, key_block: int) -> int:
    """Bytes one task keeps on chip while it walks a key block: its query rows (transposed
    into scratch), the block's keys, values and scores, the accumulators."""
    scratch = query_block * (a.head_dim + key_block + a.value_dim + 2)
    return (scratch + key_block * (a.head_dim + a.value_dim)) * _F32


def keys_walked(a: Attention, query_block: int) -> list[int]:
    """The keys each block of `query_block` query rows walks: all of them, or with a causal
    mask those up to its last row's diagonal (the kernel skips the rest)."""
    starts = range(0, a.queries, query_block)
    if a.causal is None:
        return [a.keys for _ in starts]
    last = [min(a.queries, i0 + query_block) + a.causal.offset for i0 in starts]
    return [min(a.keys, max(0, x)) for x in last]


def estimate_attention(a: Attention, query_block: int, key_block: int, target: Target) -> Estimate:
    """Predict the group in tasks of `query_block` query rows: Q, the output and the mask
    cross DRAM once, K and V once per query block (from L2 where they fit, else DRAM), as
    far as the block walks them; compute is the two products and the exponentials, spread
    over the tasks."""
    heads = math.prod(a.batch)
    blocks = -(-a.queries // query_block)
    tasks = heads * blocks
    util = wave_utilisation(tasks, target.units)
    walked = keys_walked(a, query_block)
    row = (a.head_dim + a.value_dim) * _F32  # a key's and its value's bytes
    once = heads * a.queries * row
    l2 = target.level("l2")
    level = l2 if a.keys * row <= l2.capacity // 2 else target.levels[0]
    dram = target.levels[0]
    # from DRAM: K and V once where L2 keeps them
    moved = once + (heads * max(walked, default=0) * row if level is l2 else heads * sum(walked) * row)
    stages = {dram.name: once / dram.bandwidth}
    stages[level.name] = stages.get(level.name, 0.0) + heads * sum(walked) * row / (level.bandwidth * util)
    padded_block = -(-query_block // target.lanes) * target.lanes
    flops = 2 * heads * padded_block * sum(walked) * (a.head_dim + a.value_dim + 8)
    # scalar work: each task copies its queries transposed, and every row moves its
    # running max and sum and rescales its accumulators once per key block
    steps = sum(-(-n // key_block) for n in walked)
    cycles = heads * (blocks * query_block * a.head_dim * _PACK_CYCLES
                      + query_block * steps * (_ROW_STEP_CYCLES + a.value_dim // target.lanes))
    waves = -(-tasks // target.units)
    stages["compute"] = (flops / (target.peak_flops["float32"] * util)
                         + (cycles / target.units / util + waves * TASK_OVERHEAD_CYCLES) / clock_hz(target))
    return finish(stages, tasks, waves, (), moved)
