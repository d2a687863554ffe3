"""Compile jobs: submit, watch (poll or server-sent events), cancel."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from server.api.deps import IdempotencyKeyHeader, JobQueueDep, PageDep, SessionDep, TenantDep
from server.api.schemas import CompilationIn, CompilationOut, Page
from server.api.views import compilation_out, event_stream, with_artifact
from server.db.models import JobStatus
from server.services import compilations as service

router = APIRouter(prefix="/compilations", tags=["compilations"])

@router.post("", response_model=CompilationOut | list[CompilationOut], status_code=202,
             responses={202: {"description": "the compilation; with `targets`, one per target, in order"}})
def create_compilation(body: CompilationIn, session: SessionDep, queue: JobQueueDep, tenant: TenantDep,
                       idempotency_key: IdempotencyKeyHeader = None) -> CompilationOut | list[CompilationOut]:
    """Queue a compilation of a model for a target, or one per target of `targets` (422 names an
    unknown target or option); a repeated `Idempotency-Key` returns the first request's jobs."""
    jobs = service.create_compilations(session, queue, tenant, body.model_id, body.target_names(),
                                       body.options, idempotency_key)
    out = [compilation_out(session, job) for job in jobs]
    return out if body.targets is not None else out[0]


@router.get("", response_model=Page[CompilationOut])
def list_compilations(session: SessionDep, tenant: TenantDep, page: PageDep,
                      status: JobStatus | None = None, model_id: str | None = None) -> dict:
    """This tenant's compilations, newest first, optionally by status or model."""
    rows, total = service.list_compilations(session, tenant, page.limit, page.offset, status, model_id)
    return page.of([with_artifact(job, artifact) for job, artifact in rows], total)


@router.get("/{job_id}", response_model=CompilationOut)
def get_compilation(job_id: str, session: SessionDep, tenant: TenantDep) -> CompilationOut:
    """A compilation's status, stage, progress, timings, cache hits and error."""
    return compilation_out(session, service.get_compilation(session, tenant, job_id))


@router.post("/{job_id}/cancel", response_model=CompilationOut, status_code=202)
def cancel_compilation(job_id: str, session: SessionDep, queue: JobQueueDep,
                       tenant: TenantDep) -> CompilationOut:
    """Cancel a compilation: at once if queued, between stages if running."""
    return compilation_out(session, service.cancel_compilation(session, queue, tenant, job_id))


@router.get("/{job_id}/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "`status` events (the compilation as JSON) until it ends"}})
async def compilation_events(job_id: str, request: Request, session: SessionDep,
                             tenant: TenantDep) -> StreamingResponse:
    """Server-sent events: the compilation each time it changes, ending when it finishes."""
    return event_stream(request, session, tenant, job_id)
