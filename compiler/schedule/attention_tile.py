"""Blocks of a fused attention group (compiler/ir/attention.py): query rows per task and
keys per step, recorded as `TileConfig.attention`.

A task keeps its query rows (transposed), a key and value block, the block's scores and
its accumulators on chip (compiler/cost/attention.py's footprint); the transposed
queries, which every few keys' product walks, within L1, the whole working set within
half of L2. Within that the cost model ranks the pairs: more query rows per task read K
and V fewer times, longer key blocks share each row's softmax step among more keys,
fewer rows make more tasks for the cores. The products run `rows` keys (query rows) per
pass, as many as the vector registers hold accumulators for (`register_rows`); the values'
product walks the block's keys in pieces whose value rows fit half of L1, each for all the rows.
"""

from __future__ import annotations

from compiler.cost.attention import attention_footprint, estimate_attention
from compiler.cost.model import Estimate
from compiler.ir.attention import Attention
from compiler.ir.te import Compute
from compiler.schedule.plan import ATTENTION_VECTORS_PER_PASS, TileConfig
from compiler.target.base import Target

QUERY_BLOCKS = (16, 32, 64, 128, 256)
KEY_BLOCKS = (32, 64, 128, 256, 512)
# The task's scratch lives on its thread's stack: well within the smallest default
# (OpenMP workers may get 2 MiB where the stack limit is unlimited).
SCRATCH_BYTES = 1 << 19
MIN_ROWS = 2


def register_rows(target: Target) -> int:
    """Rows of a pass of the products (keys of the scores', query rows of the values'): as
    many as the vector registers hold ATTENTION_VECTORS_PER_PASS accumulators for, beside those
    vectors and a broadcast. AVX-512's 32 registers take 6 (a whisper-sized attention,
    6 heads x 1500 x 64, one thread on a Zen 4: 42.9 ms with 4 rows, 37.6 with 6; 5 and 7
    in between, 8 spill), AVX2's 16 take 2."""
    return max(MIN_ROWS, (target.registers - ATTENTION_VECTORS_PER_PASS - 1) // ATTENTION_VECTORS_PER_PASS)


def attention_tilings(c: Compute, a: Attention, target: Target, top_k: int) -> list[tuple[TileConfig, Estimate]]:
    """The `top_k` block pairs the model predicts fastest for attention group `c` (parts `a`)."""
    rows = register_rows(target)
    l1, l2 = target.level("l1").capacity, target.level("l2").capacity
    # keys per pass of the values' product over all the task's rows: their value rows in half of L1
    sub = max(rows, l1 // 2 // (a.value_dim * 4) // rows * rows)
    ranked = []
    for bq in sorted({min(q, a.queries) for q in QUERY_BLOCKS}):
        # every pass over a few keys reads all of the transposed queries
        if bq != QUERY_BLOCKS[0] and bq * a.head_dim * 4 > l1:
            continue
        for bk in sorted({min(k, a.keys) for k in KEY_BLOCKS}):
            if bk != KEY_BLOCKS[0] and attention_footprint(a, bq, bk) > min(l2 // 2, SCRATCH_BYTES):
                continue
            block = tuple(bq if x == "i" else a.value_dim if x == "d" else 1 for x in a.out_axes)
            tile = TileConfig(block, (1,) * len(c.axes), (1,), target.lanes, attention=(bq, bk, rows, min(sub, bk)))
            ranked.append((tile, estimate_attention(a, bq, bk, target)))
    ranked.sort(key=lambda x: (x[1].time_us, -x[0].attention[0] * x[0].attention[1]))
    return ranked[:max(1, top_k)]
