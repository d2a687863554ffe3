"""The reaper: running jobs whose worker went silent are re-queued, or failed with the reason.

Runs in the API process and in every worker, so a job never stays `running`
forever even when all workers of its queue died.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from server.db.models import Job, JobStatus, new_id
from server.db.session import transaction
from server.db.types import utcnow
from server.jobs.routing import queue_key

log = logging.getLogger(__name__)

Enqueue = Callable[[str, str, str], None]  # (job_id, queue key, task_id)


def reap_expired_jobs(sessions: sessionmaker[Session], enqueue: Enqueue, max_attempts: int,
                      fresh_seconds: float = 45.0) -> int:
    """Handle every running job whose lease has run out; returns how many were handled.
    A re-queued job is routed as a new one (`fresh_seconds`: see `routing.queue_key`)."""
    now = utcnow()
    with sessions() as s:
        expired = s.execute(select(Job.id, Job.attempts, Job.stage, Job.cancel_requested, Job.target_kind,
                                   Job.target)
                            .where(Job.status == JobStatus.running, Job.lease_expires_at < now)).all()
    handled = 0
    for job_id, attempts, stage, cancel_requested, kind, target in expired:
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
                      "error": f"{lost}; re-queued (attempt {attempts} of {max_attempts})"}
        with transaction(sessions) as s:
            if s.execute(update(Job).where(*where).values(**values)).rowcount != 1:
                continue  # another reaper or the worker itself got there first
        handled += 1
        if values["status"] == JobStatus.queued:
            log.warning("re-queueing job %s: %s", job_id, values["error"])
            with sessions() as s:
                key = queue_key(s, target, kind, fresh_seconds)
            enqueue(job_id, key, values["task_id"])
    return handled
