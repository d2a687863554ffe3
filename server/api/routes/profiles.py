"""Profile jobs: time an artifact on a worker of its target, kernel by kernel."""

from __future__ import annotations

from fastapi import APIRouter

from server.api.deps import IdempotencyKeyHeader, JobQueueDep, SessionDep, TenantDep
from server.api.schemas import ProfileIn, ProfileOut
from server.api.views import profile_out
from server.db.models import JobKind
from server.services import runs as service

router = APIRouter(prefix="/profiles", tags=["profiles"])


@router.post("", response_model=ProfileOut, status_code=202)
def create_profile(body: ProfileIn, session: SessionDep, queue: JobQueueDep, tenant: TenantDep,
                   idempotency_key: IdempotencyKeyHeader = None) -> ProfileOut:
    """Queue a profile of an artifact: first-load time, median and p90 latency, peak memory, per-kernel roofline."""
    job, run = service.create_profile(session, queue, tenant, body.artifact_id, body.runs, body.threads,
                                      idempotency_key)
    return profile_out(job, run)


@router.get("/{job_id}", response_model=ProfileOut)
def get_profile(job_id: str, session: SessionDep, tenant: TenantDep) -> ProfileOut:
    """A profile's status and, once it has succeeded, its measurements."""
    return profile_out(*service.get_run(session, tenant, job_id, JobKind.profile))
