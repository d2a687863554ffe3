"""The fusion report of one compilation: kernels and predicted DRAM bytes of the plan
against the unfused one (one kernel per lowered node, each with its own best rTile),
and every group with its members, connection level, prices, timings and verdict."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.cost.model import dram_bytes
from compiler.schedule.plan import ExecutionPlan, Kernel
from compiler.schedule.tilegraph.groups import Group, GroupLog
from compiler.schedule.tilegraph.pricing import Pricer
from compiler.target.base import Target


def fusion_report(log: GroupLog, plan: ExecutionPlan, target: Target, pricer: Pricer,
                  split_back: Sequence[Group] = (), recalled: Sequence[dict] = (),
                  dram_of: Callable[[Kernel], int] | None = None) -> dict:
    """report.json's "fusion" section for `plan`, made from `log`'s graph.

    Groups: the plan's (kept), those split back after measuring in earlier rounds, and
    connections the model refused (`kept` false, their parts' price as unfused); `recalled`:
    the entries of groups an earlier compile split back, left apart by this one's plan;
    `dram_of`: a kernel's predicted DRAM bytes where known already (by default the model's)."""
    kernels = {k.args[0]: k for k in plan.kernels}
    dram_of = dram_of or (lambda k: dram_bytes(k.compute, k.tile, target))
    per_kernel = [{"symbol": k.symbol, "dram_bytes": dram_of(k)} for k in plan.kernels]
    unfused = sum(pricer.best(m.compute).dram_bytes for m in log.lowered.values())
    for g in (g for g in log.groups.values() if g.predicted_fused_us is None):
        # a concatenation whose parts are written in place runs no kernel (schedule/concat_in_place.py)
        g.predicted_fused_us = round(pricer.best(kernels[g.output].compute).time_us, 3) if g.output in kernels else 0.0
        g.predicted_unfused_us = round(sum(pricer.best(m.compute).time_us for m in g.members), 3)
    groups = [*log.groups.values(), *split_back, *log.refused.values()]
    return {
        "kernels_unfused": len(log.lowered), "kernels_fused": len(plan.kernels),
        "dram_bytes_unfused": unfused, "dram_bytes_fused": sum(k["dram_bytes"] for k in per_kernel),
        "kernel_dram_bytes": per_kernel,
        "split_back": len(split_back) + len(recalled), "refused": len(log.refused),
        "groups": [*(g.to_json() for g in groups), *recalled],
    }


def fusion_summary(fusion: dict) -> list[str]:
    """A few lines for people (`tileforge compile`): kernels and predicted DRAM bytes before
    and after fusion, and the groups not kept."""
    groups = fusion["groups"]
    untimed = sum(g["split_by"] == "untimed" for g in groups)
    lines = [f"kernels {fusion['kernels_unfused']} -> {fusion['kernels_fused']}, predicted DRAM "
             f"{fusion['dram_bytes_unfused'] / 1e6:.1f} MB -> {fusion['dram_bytes_fused'] / 1e6:.1f} MB",
             f"groups {sum(g['kept'] for g in groups)} kept, {fusion['split_back']} split back "
             f"(timed slower), {fusion['refused'] - untimed} refused (priced slower)"
             + (f", {untimed} left apart (first made in the last plan, untimed)" if untimed else "")]
    lines += [f"  not kept ({g['split_by']}): {'+'.join(g['ops'])}" for g in groups if not g["kept"]]
    return lines
