"""Compile jobs: submit, watch (poll or server-sent events), cancel."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from compiler.options import CompileOptions
from compiler.target import get_target
from server.api.deps import JobQueueDep, PageDep, SessionDep, TenantDep, owned_or_404
from server.api.schemas import CompilationIn, CompilationOut, Page
from server.db.models import TERMINAL, Artifact, Job, JobStatus, Model, new_id
from server.db.types import utcnow
from server.jobs import state
from server.jobs.routing import queue_key

router = APIRouter(prefix="/compilations", tags=["compilations"])

KEEPALIVE_SECONDS = 15.0


def compilation_out(session: Session, job: Job) -> CompilationOut:
    """A job as the API shows it, with its artifact once there is one."""
    return _with_artifact(job, session.scalar(select(Artifact).where(Artifact.job_id == job.id)))


def _with_artifact(job: Job, artifact: Artifact | None) -> CompilationOut:
    out = CompilationOut.model_validate(job)
    if artifact is not None:
        out.artifact_id, out.artifact_sha256 = artifact.id, artifact.sha256
    return out


@router.post("", response_model=CompilationOut, status_code=202)
def create_compilation(body: CompilationIn, session: SessionDep, queue: JobQueueDep,
                       tenant: TenantDep) -> CompilationOut:
    """Queue a compilation of a model for a target (422 names an unknown target or option)."""
    model = owned_or_404(session, Model, body.model_id, tenant, "model")
    target = get_target(body.target)
    CompileOptions.from_dict(body.options)
    job = Job(tenant_id=tenant.id, model_id=model.id, target=body.target, target_kind=target.kind,
              options=body.options, task_id=new_id())
    session.add(job)
    session.commit()
    try:
        key = queue_key(session, job.target, job.target_kind, queue.settings.worker_fresh_seconds)
        queue.enqueue(job.id, key, job.task_id)
    except Exception as e:
        job.status, job.error, job.finished_at = JobStatus.failed, f"could not queue the job: {e}", utcnow()
        session.commit()
        raise HTTPException(503, f"the job queue (broker) is unreachable: {type(e).__name__}") from None
    return compilation_out(session, job)


@router.get("", response_model=Page[CompilationOut])
def list_compilations(session: SessionDep, tenant: TenantDep, page: PageDep,
                      status: JobStatus | None = None, model_id: str | None = None) -> dict:
    """This tenant's compilations, newest first, optionally by status or model."""
    where = [Job.tenant_id == tenant.id]
    if status is not None:
        where.append(Job.status == status)
    if model_id is not None:
        where.append(Job.model_id == model_id)
    rows = session.execute(select(Job, Artifact).outerjoin(Artifact, Artifact.job_id == Job.id).where(*where)
                           .order_by(Job.created_at.desc(), Job.id).limit(page.limit).offset(page.offset)).all()
    total = session.scalar(select(func.count()).select_from(Job).where(*where))
    return page.of([_with_artifact(job, artifact) for job, artifact in rows], total)


@router.get("/{job_id}", response_model=CompilationOut)
def get_compilation(job_id: str, session: SessionDep, tenant: TenantDep) -> CompilationOut:
    """A compilation's status, stage, progress, timings, cache hits and error."""
    return compilation_out(session, owned_or_404(session, Job, job_id, tenant, "compilation"))


@router.post("/{job_id}/cancel", response_model=CompilationOut, status_code=202)
def cancel_compilation(job_id: str, session: SessionDep, queue: JobQueueDep,
                       tenant: TenantDep) -> CompilationOut:
    """Cancel a compilation: at once if queued, between stages if running."""
    job = owned_or_404(session, Job, job_id, tenant, "compilation")
    if not state.request_cancel(session, job):
        session.rollback()
        raise HTTPException(409, f"compilation {job_id!r} already {job.status}; nothing to cancel")
    session.commit()
    if job.task_id:
        queue.revoke(job.task_id)
    session.refresh(job)
    return compilation_out(session, job)


@router.get("/{job_id}/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "`status` events (the compilation as JSON) until it ends"}})
async def compilation_events(job_id: str, request: Request, session: SessionDep,
                             tenant: TenantDep) -> StreamingResponse:
    """Server-sent events: the compilation each time it changes, ending when it finishes."""
    owned_or_404(session, Job, job_id, tenant, "compilation")
    session.close()  # hand the connection back: the stream may last minutes and polls with its own
    sessions = request.app.state.sessions
    poll = request.app.state.settings.sse_poll_seconds

    def snapshot() -> CompilationOut:
        with sessions() as s:
            return compilation_out(s, s.get(Job, job_id))

    async def stream() -> AsyncIterator[str]:
        last, quiet = None, 0.0
        while True:
            current = await run_in_threadpool(snapshot)
            data = current.model_dump_json()
            if data != last:
                last, quiet = data, 0.0
                yield f"event: status\nid: {current.status}-{current.progress}\ndata: {data}\n\n"
            if current.status in TERMINAL:
                yield f"event: end\ndata: {json.dumps({'status': current.status})}\n\n"
                return
            if quiet >= KEEPALIVE_SECONDS:
                quiet = 0.0
                yield ": keep-alive\n\n"
            await asyncio.sleep(poll)
            quiet += poll

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
