"""Over which block a CPU reduction stages its padded windows in scratch, decided when the
plan is built (`TileConfig.stage`; the boxes: compiler/schedule/staging.py)."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.te import Compute
from compiler.schedule.staging import scratch_bytes, staged_boxes

MAX_SCRATCH_BYTES = 64 << 10  # per task, on the thread's stack; beyond it, L1 / L2 would not hold it


def staged_block(c: Compute, block: Sequence[int], thread: Sequence[int]) -> tuple[int, ...]:
    """The task block over which reduction `c` (tiled `block` with micro-tiles `thread`,
    both within its extents) stages its padded windows, or () when it stages none.

    `block` is cut along its outer axes (halved, never below the micro-tile) until the
    boxes fit the scratch: a block chosen for cache reuse may span more of a feature map
    than one task can stage, and unstaged windows are read with checked loads that do
    not vectorize. Nothing is staged when some padded load is not affine in the axes,
    or when no cut makes the boxes fit."""
    if not staged_boxes(c, block):
        return ()
    cut = list(block)
    for d in range(len(cut)):
        while scratch_bytes(staged_boxes(c, cut)) > MAX_SCRATCH_BYTES and cut[d] > thread[d]:
            cut[d] = max(thread[d], -(-cut[d] // 2))
    return tuple(cut) if scratch_bytes(staged_boxes(c, cut)) <= MAX_SCRATCH_BYTES else ()
