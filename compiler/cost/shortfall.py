"""Why a kernel falls short of its roofline bound, where the plan itself says so.

Only facts of the plan and the TE analyses are reported, never a guess about the
generated code: too few tasks to give every thread work, and tiles that together
read several times the bytes the kernel must move at least.
"""

from __future__ import annotations

from compiler.cost.analysis import TileAnalysis
from compiler.ir.te import Compute
from compiler.target.base import Target

# Tiles that move this many times the compulsory bytes re-read their inputs enough to matter.
REREAD_RATIO = 2.0


def shortfall(compute: Compute, block: tuple[int, ...], target: Target) -> str:
    """A short reason `compute`, tiled in tasks of `block` outputs, misses its bound on
    `target`, or "" where the plan gives none. Reasons are joined by "; "."""
    if compute.stages or len(block) != len(compute.axes):
        return ""  # a row group's tasks and traffic follow its rows, not this tiling
    an = TileAnalysis(compute)
    reasons = []
    tasks = an.tiles(block)
    if tasks < target.units:
        units = "cores" if target.kind == "cpu" else "SMs"
        reasons.append(f"{tasks} task{'s' * (tasks != 1)} for {target.units} {units}")
    transaction = target.levels[0].transaction
    ratio = an.traffic(block, transaction).total / max(an.compulsory(transaction), 1)
    if ratio >= REREAD_RATIO:
        reasons.append(f"its tiles read {ratio:.1f}x the compulsory bytes")
    return "; ".join(reasons)
