"""Blocks of a fused attention group on a GPU (compiler/ir/attention.py): query rows per
thread block, keys per step and query rows per thread, recorded as `TileConfig.attention`
(the kernel's `AttentionGeometry` follows from them, compiler/schedule/cuda_tile.py).

A block keeps its queries, one key (then value) block and the block's probabilities in
static shared memory, its scores, running max and sum and output columns in registers.
Within those limits the cost model (compiler/cost/cuda_attention.py) ranks the
candidates: more query rows per block read K and V fewer times, longer key blocks take
fewer barrier-bound steps, more rows per thread give each thread more independent
products, and fewer, smaller blocks leave SMs idle.
"""

from __future__ import annotations

import math

from compiler.aligned import pow2_at_least
from compiler.cost.cuda_attention import estimate_cuda_attention, thread_registers
from compiler.cost.model import Estimate
from compiler.ir.attention import Attention
from compiler.ir.te import Compute
from compiler.schedule.cuda_launch import AttentionGeometry
from compiler.schedule.cuda_tile import SMEM_LIMIT, attention_geometry
from compiler.schedule.plan import TileConfig
from compiler.target.base import Target

QUERY_BLOCKS = (2, 4, 8, 16, 32, 64, 128)
KEY_BLOCKS = (16, 32, 64)
THREAD_ROWS = (1, 2, 4, 8)
MIN_THREADS, MAX_THREADS = 64, 256  # two warps at least (fewer hide no latency), 8 at most
MAX_REGISTERS = 192  # per thread: a block of 256 threads still fits an SM's register file


def smem_bytes(a: Attention, g: AttentionGeometry) -> int:
    """Static shared memory of attention blocks `g` for parts `a`."""
    return sum(r * c for r, c in g.smem(a.head_dim, a.value_dim).values()) * 4


def _geometries(a: Attention) -> list[AttentionGeometry]:
    """The legal block shapes for `a` that fit static shared memory and the registers
    (blocks no larger than the queries and keys need, bar the smallest)."""
    out = []
    for bq in (q for q in QUERY_BLOCKS if q <= max(QUERY_BLOCKS[0], pow2_at_least(a.queries))):
        for bk in (k for k in KEY_BLOCKS if k <= max(KEY_BLOCKS[0], pow2_at_least(a.keys))):
            for rows in (r for r in THREAD_ROWS if r <= bq // 2):
                g = attention_geometry(bq, bk, rows)
                # below two warps only where even a row per thread makes no more
                if (not min(MIN_THREADS, bq * g.team) <= g.threads <= MAX_THREADS
                        or smem_bytes(a, g) > SMEM_LIMIT
                        or thread_registers(a.value_dim, bk, g.team, rows) > MAX_REGISTERS):
                    continue
                out.append(g)
    return out


def attention_fits(a: Attention) -> bool:
    """Whether attention `a` has a block shape for the GPU (its rows fit shared memory)."""
    return bool(_geometries(a))


def cuda_attention_tilings(c: Compute, a: Attention, target: Target,
                           top_k: int) -> list[tuple[TileConfig, Estimate]]:
    """The `top_k` block shapes the model predicts fastest for attention group `c` (parts `a`)."""
    ranked = []
    for g in _geometries(a):
        block = tuple(g.bq if x == "i" else a.value_dim if x == "d" else 1 for x in a.out_axes)
        tile = TileConfig(block, (1,) * len(c.axes), (1,), 1, attention=(g.bq, g.bk, g.rows))
        est = estimate_cuda_attention(a, target, bq=g.bq, bk=g.bk, team=g.team, rows=g.rows,
                                      smem_bytes=smem_bytes(a, g))
        ranked.append((tile, est))
    ranked.sort(key=lambda x: (x[1].time_us, -math.prod(x[0].attention)))
    return ranked[:max(1, top_k)]
