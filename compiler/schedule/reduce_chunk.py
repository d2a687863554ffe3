"""How far a CPU reduction walks its first reduce axis per pass over a tile, decided when
the plan is built (`TileConfig.chunk`) and rendered by compiler/codegen/c/kernel.py.

A long first reduce axis walked in chunks over the whole tile, the partial sums waiting
in a per-tile array between chunks, keeps the inputs one pass reads in cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute

# A tile's partial sums between reduce chunks live on the stack (threads have MBs).
MAX_TILE_ACC_BYTES = 256 << 10
# Shorter chunks cost more in saving and restoring partial sums than they save.
MIN_REDUCE_CHUNK = 64


def reduce_chunk(c: Compute, block: Sequence[int], reduce_step: Sequence[int]) -> int:
    """Steps of `c`'s first reduce axis per pass over a tile of `block` (within the
    extents), from the rTile's `reduce_step`; 0: the whole axis at once (no step asked,
    one pass would cover it, or the tile's partial sums would not fit the stack)."""
    if not c.reduce_axes or reduce_step[0] <= 0:
        return 0
    step = max(reduce_step[0], MIN_REDUCE_CHUNK)
    fits = math.prod(block) * dtype(c.acc_dtype).nbytes <= MAX_TILE_ACC_BYTES
    return step if fits and step < c.reduce_axes[0].extent else 0
