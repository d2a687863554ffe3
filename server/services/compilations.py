"""Compile jobs: queue one (routed to a worker that can run its target), list, look up,
cancel, and follow one as it changes (server-sent events)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from compiler.options import CompileOptions
from compiler.target import get_target
from server.core import log_context
from server.db.models import TERMINAL, Artifact, Job, JobKind, JobStatus, Model, Tenant, new_id
from server.db.types import utcnow
from server.jobs import state
from server.jobs.fairness import dispatch_room, lock_tenant_dispatch
from server.jobs.queue import JobQueue
from server.jobs.routing import queue_key
from server.services.errors import ServiceError, owned
from server.services.idempotency import forget, remember, replayed_jobs, request_sha256
from server.services.quotas import check_submission

KEEPALIVE_SECONDS = 15.0

log = logging.getLogger(__name__)


def create_compilation(session: Session, queue: JobQueue, tenant: Tenant, model_id: str, target: str,
                       options: dict[str, Any]) -> Job:
    """Queue a compilation of one of the tenant's models for one target (see create_compilations)."""
    return create_compilations(session, queue, tenant, model_id, [target], options)[0]


def create_compilations(session: Session, queue: JobQueue, tenant: Tenant, model_id: str,
                        targets: list[str], options: dict[str, Any],
                        idempotency_key: str | None = None) -> list[Job]:
    """Queue one compilation of one of the tenant's models per target, all with the same
    options (TargetError / OptionsError name an unknown target or option; 403 over the
    tenant's quotas; 503 when the broker is unreachable, the jobs then failed). With
    `idempotency_key`, a repeated request returns the jobs the first one created."""
    model = owned(session, Model, model_id, tenant, "model")
    fingerprint = request_sha256({"model_id": model_id, "targets": targets, "options": options})
    if idempotency_key is not None:
        earlier = replayed_jobs(session, tenant, idempotency_key, fingerprint)
        if earlier is not None:
            return earlier
    kinds = [get_target(target).kind for target in targets]
    CompileOptions.from_dict(options)
    jobs = [Job(id=new_id(), tenant_id=tenant.id, model_id=model.id, target=target, target_kind=kind,
                options=options, task_id=new_id()) for target, kind in zip(targets, kinds, strict=True)]
    return submit_jobs(session, queue, tenant, jobs, [], fingerprint, idempotency_key)


def submit_jobs(session: Session, queue: JobQueue, tenant: Tenant, jobs: list[Job], rows: list[Any],
                fingerprint: str, idempotency_key: str | None) -> list[Job]:
    """Commit new `jobs` (then `rows` that refer to them) with the request's `idempotency_key`,
    and publish them; returns them, or, when a concurrent request with the same key won the
    race, that request's jobs (the caller answers an earlier request's key before building
    anything: `replayed_jobs`). 403 over the tenant's quotas; jobs past the tenant's dispatch
    window for their target kind are held, not sent (server/jobs/fairness.py)."""
    lock_tenant_dispatch(session, tenant.id)  # the counts below hold until the commit
    check_submission(session, queue.settings, tenant, len(jobs))
    window = queue.settings.tenant_dispatch_window
    room = {kind: dispatch_room(session, tenant.id, kind, window) for kind in {job.target_kind for job in jobs}}
    for job in jobs:  # past the tenant's window for its kind: held, sent as its jobs end
        job.held = room[job.target_kind] <= 0
        room[job.target_kind] -= 1
    session.add_all(jobs)
    session.flush()  # the jobs first: `rows` refer to them
    session.add_all(rows)
    if idempotency_key is not None:
        remember(session, tenant, idempotency_key, fingerprint, jobs)
    try:
        session.commit()
    except IntegrityError:  # the same key, sent concurrently: the other request's jobs are the answer
        session.rollback()
        earlier = None if idempotency_key is None else replayed_jobs(session, tenant, idempotency_key, fingerprint)
        if earlier is None:
            raise
        return earlier
    try:
        publish(session, queue, [job for job in jobs if not job.held])  # held ones wait their turn
    except ServiceError:
        if idempotency_key is not None:
            forget(session, tenant, idempotency_key)
        raise
    return jobs


def publish(session: Session, queue: JobQueue, jobs: list[Job]) -> None:
    """Send each committed job's task to its queue (`routing.queue_key`); when the broker is
    unreachable the jobs are failed with the reason, and a 503 says so."""
    try:
        for job in jobs:
            key = queue_key(session, job.target, job.target_kind, queue.settings.worker_fresh_seconds)
            queue.enqueue(job.id, key, job.task_id, job.kind)
            with log_context.bound(job_id=job.id):
                log.info("job %s (%s for %s) sent to queue %s", job.id, job.kind, job.target, key)
    except Exception as e:
        for job in jobs:
            job.status, job.error, job.finished_at = JobStatus.failed, f"could not queue the job: {e}", utcnow()
        session.commit()
        raise ServiceError(503, f"the job queue (broker) is unreachable: {type(e).__name__}") from None


def get_compilation(session: Session, tenant: Tenant, job_id: str) -> Job:
    """One of the tenant's compilations (404 otherwise, and for its profile and inference jobs)."""
    return owned_job(session, tenant, job_id, JobKind.compile, "compilation")


def owned_job(session: Session, tenant: Tenant, job_id: str, kind: JobKind, noun: str) -> Job:
    """One of the tenant's jobs of `kind` (404 naming it as `noun` otherwise)."""
    job = owned(session, Job, job_id, tenant, noun)
    if job.kind != kind:
        raise ServiceError(404, f"{noun} {job_id[:80]!r} not found")
    return job


def artifact_of(session: Session, job: Job) -> Artifact | None:
    """The job's artifact, once it has one."""
    return session.scalar(select(Artifact).where(Artifact.job_id == job.id))


def list_compilations(session: Session, tenant: Tenant, limit: int, offset: int,
                      status: JobStatus | None = None,
                      model_id: str | None = None) -> tuple[Sequence[tuple[Job, Artifact | None]], int]:
    """A page of the tenant's compilations with their artifacts, newest first, and the count."""
    where = [Job.tenant_id == tenant.id, Job.kind == JobKind.compile]
    if status is not None:
        where.append(Job.status == status)
    if model_id is not None:
        where.append(Job.model_id == model_id)
    rows = session.execute(select(Job, Artifact).outerjoin(Artifact, Artifact.job_id == Job.id).where(*where)
                           .order_by(Job.created_at.desc(), Job.id).limit(limit).offset(offset)).all()
    total = session.scalar(select(func.count()).select_from(Job).where(*where)) or 0
    return [(job, artifact) for job, artifact in rows], total


def cancel_compilation(session: Session, queue: JobQueue, tenant: Tenant, job_id: str) -> Job:
    """Cancel a compilation: at once if queued, between stages if running (409 once finished)."""
    job = get_compilation(session, tenant, job_id)
    if not state.request_cancel(session, job):
        session.rollback()
        raise ServiceError(409, f"compilation {job_id!r} already {job.status}; nothing to cancel")
    session.commit()
    log.info("job %s: cancel requested", job_id)
    if job.task_id:
        queue.revoke(job.task_id)
    session.refresh(job)
    return job


async def compilation_events(snapshot: Callable[[], Awaitable[Any]], poll_seconds: float) -> AsyncIterator[str]:
    """Server-sent events of one compilation: `status` (the JSON `snapshot()` returns, a
    pydantic model with `status` and `progress`) each time it changes, keep-alive comments
    while it does not, and `end` once it has finished. `snapshot` opens its own session
    each time: a stream may last minutes."""
    last, quiet = None, 0.0
    while True:
        current = await snapshot()
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
        await asyncio.sleep(poll_seconds)
        quiet += poll_seconds
