"""Fair dispatch between tenants: at most `tenant_dispatch_window` of a tenant's jobs of one
target kind are in the broker or running at once; the rest are kept `held` in the
database and sent, oldest first, as that tenant's jobs of that kind end. (Per kind: a
tenant's CUDA jobs waiting for a GPU worker must not hold back its CPU jobs.) The broker's queues are first in, first out, so a
tenant that queues 100 jobs puts only its window in front of another tenant's one job,
and each of its later jobs goes to the back of the queue, behind the other's.

Sending is fenced like the reaper's: a held job is released by one update conditioned on
`held`, so two releasers never both send it.
"""

from __future__ import annotations

import logging

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from server.core.config import Settings
from server.db.models import Job, JobStatus, new_id
from server.db.session import transaction
from server.db.types import utcnow
from server.jobs.routing import Enqueue, publish

log = logging.getLogger(__name__)

# A job its worker may be running now, or that the broker holds.
_DISPATCHED = or_(Job.status == JobStatus.running, and_(Job.status == JobStatus.queued, Job.held.is_(False)))


def dispatch_room(session: Session, tenant_id: str, kind: str, window: int) -> int:
    """How many more of the tenant's jobs of target kind `kind` may go to the broker now."""
    dispatched = session.scalar(select(func.count()).select_from(Job)
                                .where(Job.tenant_id == tenant_id, Job.target_kind == kind, _DISPATCHED)) or 0
    return max(window - dispatched, 0)


def release_held(sessions: sessionmaker[Session], enqueue: Enqueue, settings: Settings) -> int:
    """Send the oldest held jobs of every tenant and kind with room in its window; returns how many."""
    window = settings.tenant_dispatch_window
    with sessions() as s:
        waiting = s.execute(select(Job.tenant_id, Job.target_kind)
                            .where(Job.status == JobStatus.queued, Job.held.is_(True)).distinct()).all()
        chosen = []
        for tenant_id, kind in waiting:
            room = dispatch_room(s, tenant_id, kind, window)
            if room:
                chosen += s.execute(select(Job.id, Job.target, Job.target_kind, Job.kind)
                                    .where(Job.tenant_id == tenant_id, Job.target_kind == kind,
                                           Job.status == JobStatus.queued, Job.held.is_(True))
                                    .order_by(Job.created_at, Job.id).limit(room)).all()
    sent = 0
    for job_id, target, kind, job_kind in chosen:
        task_id = new_id()
        with transaction(sessions) as s:
            if s.execute(update(Job).where(Job.id == job_id, Job.status == JobStatus.queued, Job.held.is_(True))
                         .values(held=False, published_at=utcnow(), task_id=task_id)).rowcount != 1:
                continue  # cancelled, or released by another process meanwhile
        publish(sessions, enqueue, job_id, target, kind, job_kind, task_id, settings.worker_fresh_seconds)
        sent += 1
    if sent:
        log.info("released %d held job(s)", sent)
    return sent
