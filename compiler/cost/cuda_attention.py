"""Predicted time of a fused attention group (compiler/ir/attention.py) on a GPU: one thread
block per batch index and block of query rows, walking the keys in blocks staged through
shared memory (compiler/codegen/cuda/attention.py), the online softmax in registers.

The stages are Roller's: DRAM (Q and the output once; K and V once where the heads that
run together keep theirs in L2, else once per query block), L2 (K and V once per query
block), shared memory (the staging writes and every thread's reads of the staged rows) and
compute (the two products and the exponentials, at the occupancy the block's threads,
registers and shared memory allow, plus the exposed latency of each key step's barriers).
"""

from __future__ import annotations

import math

from compiler.cost.model import (
    BLOCK_OVERHEAD_CYCLES,
    CUDA_LATENCY_STREAMS,
    STEP_LATENCY_CYCLES,
    Estimate,
    clock_hz,
    finish,
    wave_utilisation,
)
from compiler.cost.resources import THREAD_OVERHEAD_REGISTERS
from compiler.ir.attention import Attention
from compiler.target.base import Target

_F32 = 4
_EXP_FLOPS = 8  # per score: the exponential, the max and the sum
# A key step waits on four barriers and two global loads: twice the model's reduce step.
_STEPS_PER_KEY_BLOCK = 2
# Steps of the head axis whose operands are in registers at once: nvcc hoists the loads of
# the steps the kernel's score loop unrolls.
_OPERAND_STEPS = 4


def thread_registers(value_dim: int, bk: int, team: int, rows: int) -> int:
    """32-bit registers per thread: each of its `rows` query rows' scores, output columns,
    max and sum, the operands of a few steps of the scores' product, and its own
    bookkeeping."""
    scores, columns = bk // team, -(-value_dim // team)
    return rows * (scores + columns + 3) + _OPERAND_STEPS * (rows + scores) + THREAD_OVERHEAD_REGISTERS


def estimate_cuda_attention(a: Attention, target: Target, *, bq: int, bk: int, team: int, rows: int,
                            smem_bytes: int) -> Estimate:
    """Predict the group on GPU `target` in blocks of `bq` query rows walking `bk` keys per
    step, `team` threads per query row and `rows` query rows per thread, staging
    `smem_bytes` of shared memory."""
    heads, blocks = math.prod(a.batch), -(-a.queries // bq)
    tasks, steps = heads * blocks, -(-a.keys // bk)
    x, units = target.extras, target.units
    threads, regs = bq // rows * team, thread_registers(a.value_dim, bk, team, rows)
    smem_level = target.level("smem")
    per_sm = [int(x.get("max_blocks_per_sm", 32)), int(x.get("max_threads_per_sm", 2048)) // threads,
              target.registers // (regs * threads), smem_level.capacity // max(1, smem_bytes)]
    blocks_per_sm = max(1, min(per_sm))
    waves = -(-tasks // (units * blocks_per_sm))
    util = wave_utilisation(tasks, units)
    busy = min(1.0, tasks / units)  # of the shared levels' bandwidth: the SMs pulling from them

    row_bytes = (a.head_dim + a.value_dim) * _F32
    once = heads * a.queries * row_bytes
    kv = heads * a.keys * row_bytes
    together = -(-min(tasks, units * blocks_per_sm) // blocks)  # heads whose blocks run at once
    l2, dram = target.level("l2"), target.levels[0]
    moved = once + (kv if together * a.keys * row_bytes <= l2.capacity // 2 else kv * blocks)
    stages = {dram.name: moved / (dram.bandwidth * busy), l2.name: kv * blocks / (l2.bandwidth * busy)}

    scores, columns = bk // team, -(-a.value_dim // team)
    per_step = (bk * (a.head_dim + a.value_dim) + bq * bk
                + threads * (a.head_dim * (rows + scores) + bk * (rows + columns)))
    smem = tasks * (steps * per_step + bq * a.head_dim) * _F32
    stages[smem_level.name] = smem / (smem_level.bandwidth * util)

    work = heads * blocks * bq * steps * bk
    flops = work * (2 * (a.head_dim + a.value_dim) + _EXP_FLOPS)
    rounds = -(-tasks // units)  # blocks each SM runs, side by side or one after another
    resident = min(blocks_per_sm, rounds)
    latency = min(1.0, resident * threads / target.lanes * rows * scores / CUDA_LATENCY_STREAMS)
    exposed = rounds / resident * (steps * _STEPS_PER_KEY_BLOCK * STEP_LATENCY_CYCLES
                                   + BLOCK_OVERHEAD_CYCLES) / clock_hz(target)
    stages["compute"] = flops / (target.peak_flops["float32"] * util * latency) + exposed
    return finish(stages, tasks, waves, (), moved)
