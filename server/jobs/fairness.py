"""Fair dispatch between tenants: at most `tenant_dispatch_window` of a tenant's jobs of one
target kind are in the broker or running at once; the rest are kept `held` in the
database and sent, oldest first, as that tenant's jobs of that kind end. (Per kind: a
tenant's CUDA jobs waiting for a GPU worker must not hold back its CPU jobs.) The broker's queues are first in, first out, so a
tenant that queues 100 jobs puts only its window in front of another tenant's one job,
and each of its later jobs goes to the back of the queue, behind the other's.

A release and a submission decide under the tenant's lock (`lock_tenant_dispatch`): each
counts the tenant's dispatched jobs and flips `held` in one transaction, so two of them at
once never both use the last place in the window, and a job is released (sent) once.
"""

from __future__ import annotations

import logging

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from server.core.config import Settings
from server.db.models import Job, JobStatus, Tenant, new_id
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


def lock_tenant_dispatch(session: Session, tenant_id: str) -> None:
    """Serialize, until this transaction ends, every decision about the tenant's jobs that
    counts them first (quotas, the dispatch window): a submission and a release each read the
    counts and then write, and two of them interleaved both saw room for one job.

    A write to the tenant's row takes its row lock on PostgreSQL and the database's write
    lock on SQLite (reads before any write take none there), so the counts that follow
    are read by one transaction at a time per tenant."""
    session.execute(update(Tenant).where(Tenant.id == tenant_id).values(name=Tenant.name)
                    .execution_options(synchronize_session=False))


def release_held(sessions: sessionmaker[Session], enqueue: Enqueue, settings: Settings) -> int:
    """Send the oldest held jobs of every tenant and kind with room in its window; returns how many."""
    window = settings.tenant_dispatch_window
    with sessions() as s:
        waiting = s.execute(select(Job.tenant_id, Job.target_kind)
                            .where(Job.status == JobStatus.queued, Job.held.is_(True)).distinct()).all()
    chosen = []
    for tenant_id, kind in waiting:
        with transaction(sessions) as s:  # the room and the jobs taken, under the tenant's lock
            lock_tenant_dispatch(s, tenant_id)
            room = dispatch_room(s, tenant_id, kind, window)
            if not room:
                continue
            jobs = s.execute(select(Job.id, Job.target, Job.target_kind, Job.kind)
                             .where(Job.tenant_id == tenant_id, Job.target_kind == kind,
                                    Job.status == JobStatus.queued, Job.held.is_(True))
                             .order_by(Job.created_at, Job.id).limit(room)).all()
            for job in jobs:
                task_id = new_id()
                if s.execute(update(Job).where(Job.id == job.id, Job.status == JobStatus.queued, Job.held.is_(True))
                             .values(held=False, published_at=utcnow(), task_id=task_id)).rowcount == 1:
                    chosen.append((*job, task_id))  # not cancelled meanwhile
    for job_id, target, kind, job_kind, task_id in chosen:
        publish(sessions, enqueue, job_id, target, kind, job_kind, task_id, settings.worker_fresh_seconds)
    if chosen:
        log.info("released %d held job(s)", len(chosen))
    return len(chosen)
