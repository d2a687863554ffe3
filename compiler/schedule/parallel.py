"""Whether a CPU kernel shares its tasks among threads or runs on the calling thread alone,
decided when the plan is built (`TileConfig.serial`) and rendered by compiler/codegen/c/."""

from __future__ import annotations

from compiler.ir.te import Compute

# Below this many scalar ops a kernel runs on the calling thread alone: waking the
# team would cost more than the kernel.
PARALLEL_MIN_FLOPS = 1 << 17


def runs_serially(c: Compute) -> bool:
    """Whether `c` is too small to repay starting threads."""
    return c.flops() < PARALLEL_MIN_FLOPS
