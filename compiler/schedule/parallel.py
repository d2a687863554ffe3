"""Whether a CPU kernel shares its tasks among threads or runs on the calling thread alone,
decided when the plan is built (`TileConfig.serial`) and rendered by compiler/codegen/c/."""

from __future__ import annotations

from compiler.ir.te import Compute

# Below this many scalar ops a kernel runs on the calling thread alone: waking the
# team would cost more than the kernel.
PARALLEL_MIN_FLOPS = 1 << 17
# ... unless it writes this many bytes or more: a copy is one op an element, and its
# memory, not its arithmetic, is what the team shares. A channel shuffle's transpose of
# 75 KB (ShuffleNetV2, 96 channels on 14 x 14) read what two threads had just written and
# ran on one: sharing the shuffles' tasks, the model ran 5% faster (two threads, Zen 5).
PARALLEL_MIN_BYTES = 1 << 15


def runs_serially(c: Compute) -> bool:
    """Whether `c` is too small to repay starting threads."""
    return c.flops() < PARALLEL_MIN_FLOPS and c.nbytes < PARALLEL_MIN_BYTES
