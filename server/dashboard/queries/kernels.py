"""The kernel cache as one tenant sees it: filtered pages, totals, and the scatter of
predicted vs measured time.

Kernels hold no weights and no names, so every tenant sees the shared cache; a tenant
with private kernels also sees its own namespace, and nobody sees another tenant's
(server/db/kernel_namespace.py). Which jobs used a kernel is tenant data and lives in
queries/usage.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Select, case, func, select
from sqlalchemy.orm import Session, defer

from server.dashboard.queries.paging import Page, paginate
from server.db.kernel_namespace import visible_kernel, visible_to
from server.db.models import Kernel

SORTABLE = {
    "op": Kernel.op_pattern,
    "target": Kernel.target_fingerprint,
    "dtype": Kernel.dtypes,
    "predicted": Kernel.estimated_us,
    "measured": Kernel.measured_us,
    "hits": Kernel.hit_count,
    "created": Kernel.created_at,
    "used": Kernel.last_used_at,
}
MEASURED_CHOICES = ("", "measured", "unmeasured")
STALE_CHOICES = ("", "fresh", "stale")


@dataclass(frozen=True)
class KernelFilter:
    """What the cache page asks for; unknown or empty values mean "any". `viewer` is the
    tenant looking."""

    viewer: str
    target: str = ""
    op: str = ""
    measured: str = ""
    stale: str = ""
    key: str = ""
    sort: str = "used"
    desc: bool = True
    page: int = 1
    per_page: int = 25

    def where(self) -> list:
        """SQL conditions for the filters that are set."""
        conds = [visible_to(self.viewer)]
        if self.target:
            conds.append(Kernel.target_fingerprint == self.target)
        if self.op:
            conds.append(func.lower(Kernel.op_pattern).contains(self.op.lower(), autoescape=True))
        if self.measured == "measured":
            conds.append(Kernel.measured_us.is_not(None))
        elif self.measured == "unmeasured":
            conds.append(Kernel.measured_us.is_(None))
        if self.stale == "stale":
            conds.append(Kernel.stale.is_(True))
        elif self.stale == "fresh":
            conds.append(Kernel.stale.is_(False))
        if self.key:
            conds.append(Kernel.key.startswith(self.key.strip().lower(), autoescape=True))
        return conds

    def query(self) -> Select:
        column = SORTABLE.get(self.sort, Kernel.last_used_at)
        order = column.desc() if self.desc else column.asc()
        # Source and binary can be large; the table shows neither.
        return (select(Kernel).options(defer(Kernel.source), defer(Kernel.binary), defer(Kernel.te_json))
                .where(*self.where()).order_by(order.nulls_last(), Kernel.key))


def kernel_page(session: Session, flt: KernelFilter) -> Page[Kernel]:
    """The page of kernels `flt` asks for."""
    return paginate(session, flt.query(), flt.page, flt.per_page)


@dataclass(frozen=True)
class TargetTotals:
    """Kernels and hits of one target fingerprint."""

    target: str
    kernels: int
    hits: int

    @property
    def hit_rate(self) -> float | None:
        return _hit_rate(self.hits, self.kernels)


@dataclass(frozen=True)
class CacheTotals:
    """Counts over the whole cache: each kernel was built once (a miss) and then hit `hits` times."""

    kernels: int = 0
    hits: int = 0
    stale: int = 0
    measured: int = 0
    per_target: list[TargetTotals] = field(default_factory=list)

    @property
    def hit_rate(self) -> float | None:
        return _hit_rate(self.hits, self.kernels)


def _hit_rate(hits: int, kernels: int) -> float | None:
    lookups = hits + kernels
    return hits / lookups if lookups else None


def cache_totals(session: Session, viewer: str) -> CacheTotals:
    """Kernels, hits, stale and measured counts, and the same per target (most kernels
    first), of what tenant `viewer` may see."""
    kernels, hits, stale, measured = session.execute(select(
        func.count(Kernel.key),
        func.coalesce(func.sum(Kernel.hit_count), 0),
        func.coalesce(func.sum(case((Kernel.stale.is_(True), 1), else_=0)), 0),
        func.count(Kernel.measured_us),
    ).where(visible_to(viewer))).one()
    per_target = session.execute(
        select(Kernel.target_fingerprint, func.count(), func.coalesce(func.sum(Kernel.hit_count), 0))
        .where(visible_to(viewer)).group_by(Kernel.target_fingerprint).order_by(func.count().desc(), Kernel.target_fingerprint)).all()
    return CacheTotals(kernels, int(hits), int(stale), measured,
                       [TargetTotals(t, n, int(h)) for t, n, h in per_target])


def known_op_patterns(session: Session, viewer: str, limit: int = 200) -> list[str]:
    """Distinct op patterns `viewer` may see, for the filter's suggestions."""
    return list(session.scalars(select(Kernel.op_pattern).where(visible_to(viewer)).distinct().order_by(Kernel.op_pattern).limit(limit)))


def get_kernel(session: Session, viewer: str, key: str) -> Kernel | None:
    """The kernel `viewer` means by this key (see kernel_namespace.visible_kernel)."""
    return visible_kernel(session, viewer, key)


@dataclass(frozen=True)
class TimedKernel:
    """A kernel's predicted and measured time."""

    key: str
    op_pattern: str
    predicted: float
    measured: float


def timed_kernels(session: Session, viewer: str, target: str = "", limit: int = 500) -> list[TimedKernel]:
    """Kernels `viewer` may see with both a predicted and a measured time (most recently used first)."""
    query = (select(Kernel.key, Kernel.op_pattern, Kernel.estimated_us, Kernel.measured_us)
             .where(visible_to(viewer), Kernel.estimated_us.is_not(None), Kernel.measured_us.is_not(None))
             .order_by(Kernel.last_used_at.desc()).limit(limit))
    if target:
        query = query.where(Kernel.target_fingerprint == target)
    return [TimedKernel(*row) for row in session.execute(query)]
