"""Profile jobs on the dashboard: start one for an artifact, and show one (latency, memory,
a per-kernel bar chart and the roofline)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from server.api.deps import JobQueueDep, SessionDep
from server.dashboard.auth import CookieTenantDep, SameOriginDep
from server.dashboard.charts.bars import bar_chart
from server.dashboard.queries import runs as q
from server.dashboard.templating import not_found_page, render
from server.db.models import TERMINAL, JobStatus
from server.services import runs
from server.services.roofline import roofline_of

router = APIRouter()

DASHBOARD_RUNS = 50  # timed runs of a profile started from the dashboard


@router.post("/artifacts/{artifact_id}/profile", dependencies=[SameOriginDep])
def start_profile(artifact_id: str, session: SessionDep, queue: JobQueueDep, tenant: CookieTenantDep) -> Response:
    """Queue a profile of an artifact (the service the API's route calls too); then show it."""
    job, _ = runs.create_profile(session, queue, tenant, artifact_id, DASHBOARD_RUNS, None)
    return RedirectResponse(f"/profiles/{job.id}", status_code=303)


@router.get("/profiles/{job_id}")
def profile_page(job_id: str, request: Request, session: SessionDep, tenant: CookieTenantDep) -> Response:
    """One profile: status, first load, latency, memory, each kernel's time as a bar and the roofline."""
    row = q.get_profile(session, tenant.id, job_id)
    if row is None:
        return not_found_page(request, tenant, "models", "profile", job_id)
    result = row.run.result if row.job.status == JobStatus.succeeded else None
    rows = (result or {}).get("rows") or []
    chart = bar_chart([(f"{r['id']} {r['op_pattern']}", r["measured_us"]) for r in rows],
                      "Time per kernel (us)")
    return render(request, "profile.html", tenant=tenant, nav="models", row=row, result=result,
                  active=row.job.status not in TERMINAL, kernel_chart=chart, roofline=roofline_of(result))
