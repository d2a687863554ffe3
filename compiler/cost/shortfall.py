"""Why a kernel falls short of its roofline bound, where the plan itself says so.

Only facts of the plan and the TE analyses are reported, never a guess about the
generated code: too few tasks to give every thread work, tiles that together read
several times the bytes the kernel must move at least, and operations per output that
the FLOP count takes as one each although none is a multiply-add (an exp, a divide: a
SiLU epilogue is sigmoid's exp and divide per output, beside only 16 multiply-adds in
EfficientNet-B0's 16 -> 96 expansion).
"""

from __future__ import annotations

import math

from compiler.cost.analysis import TileAnalysis
from compiler.ir.te import Call, Compute, Expr, walk
from compiler.target.base import Target

# Tiles that move this many times the compulsory bytes re-read their inputs enough to matter.
REREAD_RATIO = 2.0
# Operations that no FMA computes, each counted as one FLOP (compiler/ir/te.py `count_ops`).
NOT_MULTIPLY_ADDS = frozenset({"div", "reciprocal", "pow", "exp", "log", "sqrt", "tanh", "erf", "sin", "cos",
                               "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"})


def shortfall(compute: Compute, block: tuple[int, ...], target: Target, compute_bound: bool = False) -> str:
    """A short reason `compute`, tiled in tasks of `block` outputs, misses its bound on
    `target` (its FLOPs' where `compute_bound`, else its bytes'), or "" where the plan
    gives none. Reasons are joined by "; "."""
    reasons = [] if compute.stages or len(block) != len(compute.axes) else _plan_reasons(compute, block, target)
    slow = list(dict.fromkeys(op for c in (*compute.stages, compute) for op in _not_multiply_adds(c))) \
        if compute_bound else []
    if slow:
        # a group's members each reduce their own extent: only a lone contraction's is named
        beside = math.prod(a.extent for a in compute.reduce_axes) if compute.is_reduction and not compute.stages else 0
        reasons.append(f"{', '.join(slow)} per output, each counted as one FLOP"
                       + (f", beside {beside} multiply-add{'s' * (beside != 1)}" if beside else ""))
    return "; ".join(reasons)


def _plan_reasons(compute: Compute, block: tuple[int, ...], target: Target) -> list[str]:
    """Idle cores and re-read inputs of a lone Compute's tiling (a row group's tasks and
    traffic follow its rows, not its tiling: none are said of it)."""
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
    return reasons


def _not_multiply_adds(compute: Compute) -> list[str]:
    """The ops per output element, outside the reduction, that are not multiply-adds
    (`NOT_MULTIPLY_ADDS`), in the order met."""
    per_output: Expr | None = compute.post if compute.is_reduction else compute.body
    if per_output is None:
        return []
    return [x.op for x in walk(per_output) if isinstance(x, Call) and x.op in NOT_MULTIPLY_ADDS]
