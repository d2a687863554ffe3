"""Over which block a CPU reduction stages its padded windows in scratch, decided when the
plan is built (`TileConfig.stage`; the boxes: compiler/schedule/staging.py)."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.te import Compute
from compiler.schedule.staging import scratch_bytes, staged_boxes

# Per task, on the thread's stack: half of the smallest common L1 (32 KiB), so the box is
# still in L1 when the micro-tiles read it back, beside the output rows they write. At 64 KiB
# a box outgrew L1 and was read back from L2; measured one thread, AVX-512 (48 KiB L1):
# depthwise 3x3 on 112 x 112 (32 channels) 229 -> 194 us, the same at stride 2 (128
# channels) 514 -> 457 us, ResNet's 3x3 stride-2 max-pool (64 x 112 x 112) 325 -> 288 us.
MAX_SCRATCH_BYTES = 16 << 10


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
