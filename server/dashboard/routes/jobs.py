"""The tenant's jobs: list, one job live, its events, cancel, and its artifact.

Live progress and downloads go through the API's own route functions with the
cookie's tenant, so the dashboard and `/v1` share one events stream and one
download path.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from compiler.stages import STAGES
from server.api.deps import JobQueueDep, SessionDep, StorageDep
from server.api.views import event_stream
from server.dashboard.auth import CookieTenantDep, SameOriginDep
from server.dashboard.charts.line import rate_over_time
from server.dashboard.charts.timeline import stage_timeline
from server.dashboard.queries import jobs as q
from server.dashboard.templating import not_found_page, render
from server.services import artifacts, compilations
from server.services.errors import ServiceError
from server.services.fusion import fusion_table
from server.services.roofline import roofline_table

router = APIRouter()

PER_PAGE = 25


def ordered_stages(stage_seconds: dict[str, float]) -> list[tuple[str, float]]:
    """(stage, seconds) in pipeline order; stages the pipeline does not name come last."""
    known = [(s, stage_seconds[s]) for s in STAGES if s in stage_seconds]
    return known + [(s, t) for s, t in stage_seconds.items() if s not in STAGES]


@router.get("/jobs")
def jobs_page(request: Request, session: SessionDep, tenant: CookieTenantDep, status: str = "",
              page: int = 1) -> Response:
    """The tenant's jobs, newest first, with live progress for the ones still running."""
    status = status if status in q.STATUS_CHOICES else ""
    return render(request, "jobs.html", tenant=tenant, nav="jobs", status=status,
                  rows=q.job_page(session, tenant.id, status=status, page=page, per_page=PER_PAGE),
                  counts=q.status_counts(session, tenant.id), status_choices=q.STATUS_CHOICES,
                  hit_rate_chart=rate_over_time(q.hit_rate_over_time(session, tenant.id),
                                                "Cache hit rate of finished jobs over time"))


@router.get("/jobs/{job_id}")
def job_page(job_id: str, request: Request, session: SessionDep, tenant: CookieTenantDep) -> Response:
    """One job: stages, timings, cache hits, validation, error, kernels, fusion, roofline and artifact."""
    row = q.get_job(session, tenant.id, job_id)
    if row is None:
        return not_found_page(request, tenant, "jobs", "job", job_id)
    stages = ordered_stages(row.job.stage_seconds or {})
    report = row.artifact.report if row.artifact is not None else {}
    return render(request, "job.html", tenant=tenant, nav="jobs", row=row, stages=STAGES,
                  timeline=stage_timeline(stages, "Time per stage"),
                  kernels=report.get("kernels", []), fusion=fusion_table(row.artifact),
                  roofline=roofline_table(row.artifact))


@router.get("/jobs/{job_id}/events")
async def job_events(job_id: str, request: Request, session: SessionDep, tenant: CookieTenantDep) -> Response:
    """Server-sent events of one job: the API's stream, authorised by the login cookie."""
    return event_stream(request, session, tenant, job_id)


@router.post("/jobs/{job_id}/cancel", dependencies=[SameOriginDep])
def cancel_job(job_id: str, session: SessionDep, queue: JobQueueDep, tenant: CookieTenantDep) -> Response:
    """Cancel a job (the service the API's route calls too), then show the job."""
    try:
        compilations.cancel_compilation(session, queue, tenant, job_id)
    except ServiceError as e:
        if e.status != 409:  # 409: it finished meanwhile; its page says how
            raise
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)


@router.get("/artifacts/{artifact_id}")
def artifact_download(artifact_id: str, session: SessionDep, storage: StorageDep,
                      tenant: CookieTenantDep) -> Response:
    """Download an artifact, as the API does."""
    return artifacts.artifact_download(storage, artifacts.get_artifact(session, tenant, artifact_id))
