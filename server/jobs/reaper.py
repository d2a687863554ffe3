"""The reaper: running jobs whose worker went silent are re-queued, or failed with the
reason; queued jobs whose broker message may be lost are published again; expired models
and artifacts are deleted and the kernel cache is kept under its cap.

Runs in the API process and in every worker (`sweep`, each reaper interval), so a job
never stays `running` forever even when all workers of its queue died, nor `queued`
forever when the broker restarted without keeping its messages.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from server.core.config import Settings
from server.db.models import Job, JobStatus, new_id
from server.db.session import transaction
from server.db.types import utcnow
from server.jobs.fairness import release_held
from server.jobs.routing import Enqueue, publish
from server.services.cache_admin import evict_to_bytes
from server.services.retention import sweep_retention
from server.storage import Storage

log = logging.getLogger(__name__)

def reap_expired_jobs(sessions: sessionmaker[Session], enqueue: Enqueue, max_attempts: int,
                      fresh_seconds: float = 45.0) -> int:
    """Handle every running job whose lease has run out; returns how many were handled.
    A re-queued job is routed as a new one (`fresh_seconds`: see `routing.queue_key`)."""
    now = utcnow()
    with sessions() as s:
        expired = s.execute(select(Job.id, Job.attempts, Job.stage, Job.cancel_requested, Job.target_kind,
                                   Job.target, Job.kind)
                            .where(Job.status == JobStatus.running, Job.lease_expires_at < now)).all()
    handled = 0
    for job_id, attempts, stage, cancel_requested, kind, target, job_kind in expired:
        where = (Job.id == job_id, Job.status == JobStatus.running, Job.attempts == attempts,
                 Job.lease_expires_at < now)
        lost = f"the worker running this job stopped responding during stage {stage or 'start'}"
        if cancel_requested:
            values = {"status": JobStatus.cancelled, "finished_at": now, "lease_expires_at": None}
        elif attempts >= max_attempts:
            values = {"status": JobStatus.failed, "finished_at": now, "lease_expires_at": None,
                      "error": f"{lost} (attempt {attempts} of {max_attempts}); giving up"}
        else:
            values = {"status": JobStatus.queued, "lease_expires_at": None, "task_id": new_id(),
                      "published_at": now, "error": f"{lost}; re-queued (attempt {attempts} of {max_attempts})"}
        with transaction(sessions) as s:
            if s.execute(update(Job).where(*where).values(**values)).rowcount != 1:
                continue  # another reaper or the worker itself got there first
        handled += 1
        if values["status"] == JobStatus.queued:
            log.warning("re-queueing job %s: %s", job_id, values["error"])
            publish(sessions, enqueue, job_id, target, kind, job_kind, values["task_id"], fresh_seconds)
    return handled


def republish_lost_jobs(sessions: sessionmaker[Session], enqueue: Enqueue, lost_after_seconds: float,
                        fresh_seconds: float = 45.0) -> int:
    """Publish again every queued job whose task was sent more than `lost_after_seconds` ago
    (a broker restarted without persistence keeps none of its messages); returns how many.

    Fenced: each job is taken by one update conditioned on the publication time it was
    read with, so two reapers never both publish it. Idempotent: where the first message
    was not lost after all, the second finds the job claimed (a job is claimed by one
    atomic update from `queued`) and does nothing.
    """
    cutoff = utcnow() - timedelta(seconds=lost_after_seconds)
    published = func.coalesce(Job.published_at, Job.created_at)
    with sessions() as s:
        waiting = s.execute(select(Job.id, Job.target, Job.target_kind, Job.kind, Job.published_at)
                            .where(Job.status == JobStatus.queued, Job.cancel_requested.is_(False),
                                   Job.held.is_(False), published < cutoff)).all()
    handled = 0
    for job_id, target, kind, job_kind, last in waiting:
        task_id, now = new_id(), utcnow()
        same = Job.published_at.is_(None) if last is None else Job.published_at == last
        with transaction(sessions) as s:
            if s.execute(update(Job).where(Job.id == job_id, Job.status == JobStatus.queued, same)
                         .values(published_at=now, task_id=task_id)).rowcount != 1:
                continue  # claimed, cancelled or published by another reaper meanwhile
        log.warning("publishing job %s again: queued since its task was sent %s", job_id, last)
        publish(sessions, enqueue, job_id, target, kind, job_kind, task_id, fresh_seconds)
        handled += 1
    return handled


def sweep(sessions: sessionmaker[Session], enqueue: Enqueue, settings: Settings, storage: Storage) -> None:
    """One reaper pass: expired leases first, then queued jobs whose message may be lost, then
    held jobs whose tenant has room again (should a worker have died before sending them),
    then retention (expired models and artifacts, orphan blobs) and the kernel cache's size cap."""
    reap_expired_jobs(sessions, enqueue, settings.job_max_attempts, settings.worker_fresh_seconds)
    republish_lost_jobs(sessions, enqueue, settings.job_republish_seconds, settings.worker_fresh_seconds)
    release_held(sessions, enqueue, settings)
    sweep_retention(sessions, storage, settings)
    if settings.kernel_cache_max_bytes:
        with transaction(sessions) as s:
            evicted = evict_to_bytes(s, settings.kernel_cache_max_bytes)
        if evicted.rows:
            log.info("kernel cache over its cap: evicted %d row(s), %d bytes", evicted.rows, evicted.bytes)
