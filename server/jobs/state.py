"""Job state changes, each one conditional UPDATE so concurrent workers, reapers and
the API never overwrite each other.

A worker owns a job while `status == running` and `attempts` equals the attempt it
claimed; every write it makes is fenced on both, so a worker that lost its lease
(and whose job was re-queued) cannot touch the job any more.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from server.db.models import TERMINAL, Artifact, Job, JobStatus
from server.db.types import utcnow
from server.storage import Blob


class LeaseLost(Exception):
    """This worker no longer owns the job (it was reaped, cancelled or finished elsewhere)."""


def claim(session: Session, job_id: str, worker: str, task_id: str, lease_seconds: float) -> int | None:
    """Take a queued job (or a running one whose lease ran out); returns the attempt number, or None."""
    now = utcnow()
    claimable = or_(Job.status == JobStatus.queued,
                    and_(Job.status == JobStatus.running, Job.lease_expires_at < now))
    result = session.execute(
        update(Job).where(Job.id == job_id, claimable, Job.cancel_requested.is_(False))
        .values(status=JobStatus.running, attempts=Job.attempts + 1, worker=worker, task_id=task_id, stage=None,
                progress=0.0, error=None, lease_expires_at=now + timedelta(seconds=lease_seconds),
                started_at=now)
    )
    if result.rowcount != 1:
        return None
    return session.scalar(select(Job.attempts).where(Job.id == job_id))


def _owned(job_id: str, attempt: int):
    return and_(Job.id == job_id, Job.status == JobStatus.running, Job.attempts == attempt)


def renew(session: Session, job_id: str, attempt: int, lease_seconds: float, **values) -> bool:
    """Extend the lease (and write `values`); returns whether cancellation was asked for.

    Raises LeaseLost when the job is no longer this attempt's.
    """
    result = session.execute(
        update(Job).where(_owned(job_id, attempt))
        .values(lease_expires_at=utcnow() + timedelta(seconds=lease_seconds), **values)
    )
    if result.rowcount != 1:
        raise LeaseLost(job_id)
    return bool(session.scalar(select(Job.cancel_requested).where(Job.id == job_id)))


def finish(session: Session, job_id: str, attempt: int, status: JobStatus, **values) -> None:
    """Move an owned job to a terminal `status` (LeaseLost when it is not ours any more)."""
    result = session.execute(
        update(Job).where(_owned(job_id, attempt))
        .values(status=status, finished_at=utcnow(), lease_expires_at=None, **values)
    )
    if result.rowcount != 1:
        raise LeaseLost(job_id)


def succeed(session: Session, job_id: str, attempt: int, tenant_id: str, blob: Blob,
            report: dict, **values) -> None:
    """Record the artifact and mark the job succeeded, in the caller's one transaction."""
    finish(session, job_id, attempt, JobStatus.succeeded, progress=1.0, stage="done", **values)
    session.add(Artifact(tenant_id=tenant_id, job_id=job_id, sha256=blob.sha256, size=blob.size,
                         report=report))


def release(session: Session, job_id: str, attempt: int, reason: str) -> None:
    """Put an owned job back in the queue after a transient fault (the task retries it)."""
    session.execute(
        update(Job).where(_owned(job_id, attempt))
        .values(status=JobStatus.queued, lease_expires_at=None, error=reason)
    )


def fail_unfinished(session: Session, job_id: str, task_id: str, reason: str) -> None:
    """Fail a job its task gave up on, unless it finished or was handed to another task."""
    session.execute(
        update(Job).where(Job.id == job_id, Job.task_id == task_id, Job.status.not_in(TERMINAL))
        .values(status=JobStatus.failed, error=reason, finished_at=utcnow(), lease_expires_at=None)
    )


def request_cancel(session: Session, job: Job) -> bool:
    """Cancel `job`: at once if queued, at its next stage if running; False if already finished."""
    if session.execute(update(Job).where(Job.id == job.id, Job.status == JobStatus.queued)
                       .values(status=JobStatus.cancelled, cancel_requested=True,
                               finished_at=utcnow())).rowcount:
        return True
    return bool(session.execute(update(Job).where(Job.id == job.id, Job.status == JobStatus.running)
                                .values(cancel_requested=True)).rowcount)
