"""The kernel cache page (the dashboard's home) and one kernel's page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from server.api.deps import SessionDep
from server.dashboard.auth import CookieTenantDep
from server.dashboard.charts.bars import bar_chart
from server.dashboard.charts.scatter import ScatterPoint, predicted_vs_measured
from server.dashboard.formatting import target_labels
from server.dashboard.queries import kernels as q
from server.dashboard.queries.usage import kernel_uses
from server.dashboard.templating import not_found_page, render, url_with
from server.dashboard.tiles import tile_levels
from server.db.kernel_namespace import compiler_key

router = APIRouter()

PER_PAGE = 25


@router.get("/")
def cache_page(request: Request, session: SessionDep, tenant: CookieTenantDep, target: str = "",
               op: str = "", measured: str = "", stale: str = "", key: str = "", sort: str = "used",
               order: str = "desc", page: int = 1) -> Response:
    """The kernel cache: totals, charts, and the filtered, sorted, paginated table."""
    flt = q.KernelFilter(viewer=tenant.id, target=target, op=op.strip(),
                         measured=measured if measured in q.MEASURED_CHOICES else "",
                         stale=stale if stale in q.STALE_CHOICES else "", key=key.strip(),
                         sort=sort if sort in q.SORTABLE else "used", desc=order != "asc",
                         page=page, per_page=PER_PAGE)
    totals = q.cache_totals(session, tenant.id)
    labels = target_labels([t.target for t in totals.per_target])
    per_target = bar_chart([(labels[t.target], t.kernels) for t in totals.per_target], "Kernels per target",
                           hrefs=[url_with(request, target=t.target) for t in totals.per_target])
    scatter = predicted_vs_measured(
        [ScatterPoint(k.predicted, k.measured, k.op_pattern, f"/kernels/{k.key}")
         for k in q.timed_kernels(session, tenant.id, flt.target)],
        "Predicted vs measured time per kernel")
    return render(request, "cache.html", tenant=tenant, nav="cache", flt=flt, totals=totals,
                  rows=q.kernel_page(session, flt), op_patterns=q.known_op_patterns(session, tenant.id),
                  per_target_chart=per_target, scatter_chart=scatter,
                  measured_choices=q.MEASURED_CHOICES, stale_choices=q.STALE_CHOICES)


@router.get("/kernels/{key}")
def kernel_page(key: str, request: Request, session: SessionDep, tenant: CookieTenantDep) -> Response:
    """One kernel: source, tile config per memory level, times, and the tenant's jobs that used it."""
    kernel = q.get_kernel(session, tenant.id, key)
    if kernel is None:
        return not_found_page(request, tenant, "cache", "kernel", key)
    return render(request, "kernel.html", tenant=tenant, nav="cache", kernel=kernel,
                  tiles=tile_levels(kernel.tile_config or {}, kernel.target_fingerprint),
                  uses=kernel_uses(session, tenant.id, compiler_key(kernel)), binary_size=len(kernel.binary or b""))
