"""A fusion report as the job page shows it: report.json's "fusion" section
(compiler/schedule/tilegraph/report.py), read defensively, since reports written before
it existed lack it."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.db.models import Artifact


@dataclass(frozen=True)
class FusionTable:
    """Kernels and predicted DRAM bytes before and after fusion, the groups, and the GPU's
    split-K verdicts (each split contraction timed split and whole, report.json's
    "split_k")."""

    kernels_unfused: int
    kernels_fused: int
    dram_mb_unfused: float
    dram_mb_fused: float
    groups: list[dict] = field(default_factory=list)
    split_k: list[dict] = field(default_factory=list)


def fusion_table(artifact: Artifact | None) -> FusionTable | None:
    """The artifact's fusion report; None when it has none (no artifact, an older report)."""
    report = artifact.report if artifact is not None else None
    fusion = report.get("fusion") if isinstance(report, dict) else None
    if not isinstance(fusion, dict):
        return None
    try:
        return FusionTable(int(fusion["kernels_unfused"]), int(fusion["kernels_fused"]),
                           float(fusion["dram_bytes_unfused"]) / 1e6, float(fusion["dram_bytes_fused"]) / 1e6,
                           [g for g in fusion.get("groups") or [] if isinstance(g, dict)],
                           [v for v in _list(report.get("split_k")) if isinstance(v, dict)])
    except (KeyError, TypeError, ValueError):
        return None


def _list(value: object) -> list:
    return value if isinstance(value, list) else []
