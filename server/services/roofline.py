"""A roofline as pages show it: report.json's rows, or a profile job's (compiler/cost/roofline.py),
read defensively, since reports written before the roofline existed lack it."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.db.models import Artifact

# Rows a page shows: the kernels that lost the most time against their bound.
TOP_ROWS = 10


@dataclass(frozen=True)
class RooflineTable:
    """The measured bounds (None without a measurement, `note` then says why), the first
    `TOP_ROWS` rows by time lost, and how many rows the report holds."""

    bounds: dict | None
    note: str
    rows: list[dict] = field(default_factory=list)
    total: int = 0


def roofline_table(artifact: Artifact | None, top: int = TOP_ROWS) -> RooflineTable | None:
    """The artifact's roofline, its rows already sorted by time lost; None when the artifact
    has none (no artifact, a report from before the roofline, or no kernel measured)."""
    report = artifact.report if artifact is not None else None
    return roofline_of(report.get("roofline") if isinstance(report, dict) else None, top)


def roofline_of(roofline: object, top: int = TOP_ROWS) -> RooflineTable | None:
    """A roofline dict (`roofline_report`'s: a report's, or a profile job's result) as a
    table; None when it is not one or has no rows."""
    if not isinstance(roofline, dict):
        return None
    rows = [r for r in roofline.get("rows") or [] if isinstance(r, dict)]
    if not rows:
        return None
    bounds = roofline.get("bounds")
    return RooflineTable(bounds if isinstance(bounds, dict) else None, str(roofline.get("note") or ""),
                         rows[:top], len(rows))
