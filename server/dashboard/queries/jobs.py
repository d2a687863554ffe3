"""A tenant's compile jobs, their artifacts, and their cache hit rate over time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.dashboard.queries.paging import Page, paginate
from server.db.models import TERMINAL, Artifact, Job, JobKind, JobStatus, Model

STATUS_CHOICES = ("", *(s.value for s in JobStatus))


@dataclass(frozen=True)
class JobRow:
    """A job with the model it compiled and its artifact (if it produced one)."""

    job: Job
    model: Model
    artifact: Artifact | None

    @property
    def active(self) -> bool:
        return self.job.status not in TERMINAL

    @property
    def seconds(self) -> float | None:
        """Wall time from start to finish (or until now while running)."""
        if self.job.started_at is None:
            return None
        end = self.job.finished_at or datetime.now(self.job.started_at.tzinfo)
        return (end - self.job.started_at).total_seconds()


def _rows(session: Session, jobs: list[Job]) -> list[JobRow]:
    if not jobs:
        return []
    models = {m.id: m for m in session.scalars(select(Model).where(Model.id.in_({j.model_id for j in jobs})))}
    artifacts = {a.job_id: a for a in session.scalars(select(Artifact).where(Artifact.job_id.in_([j.id for j in jobs])))}
    return [JobRow(j, models[j.model_id], artifacts.get(j.id)) for j in jobs]


def job_page(session: Session, tenant_id: str, status: str = "", model_id: str = "",
             page: int = 1, per_page: int = 25) -> Page[JobRow]:
    """The tenant's jobs, newest first, optionally of one status or one model."""
    query = select(Job).where(Job.tenant_id == tenant_id, Job.kind == JobKind.compile).order_by(Job.created_at.desc(), Job.id)
    if status:
        query = query.where(Job.status == status)
    if model_id:
        query = query.where(Job.model_id == model_id)
    result = paginate(session, query, page, per_page)
    return Page(_rows(session, result.rows), result.total, result.page, result.per_page)


def get_job(session: Session, tenant_id: str, job_id: str) -> JobRow | None:
    """The tenant's job `job_id`; another tenant's job is as absent as a missing one."""
    job = session.get(Job, job_id)
    if job is None or job.tenant_id != tenant_id or job.kind != JobKind.compile:
        return None
    return _rows(session, [job])[0]


def jobs_of_model(session: Session, tenant_id: str, model_id: str, limit: int = 100) -> list[JobRow]:
    """The jobs that compiled one of the tenant's models, newest first."""
    jobs = session.scalars(select(Job).where(Job.tenant_id == tenant_id, Job.model_id == model_id,
                                             Job.kind == JobKind.compile)
                           .order_by(Job.created_at.desc(), Job.id).limit(limit)).all()
    return _rows(session, list(jobs))


def status_counts(session: Session, tenant_id: str) -> dict[str, int]:
    """How many of the tenant's compile jobs are in each status."""
    rows = session.execute(select(Job.status, func.count()).where(Job.tenant_id == tenant_id,
                                                                  Job.kind == JobKind.compile)
                           .group_by(Job.status)).all()
    return {status: n for status, n in rows}


def hit_rate_over_time(session: Session, tenant_id: str, buckets: int = 24) -> list[tuple[datetime, float]]:
    """Cache hit rate of the tenant's finished jobs, in up to `buckets` equal time slices
    (each point: the slice's last finish time, hits / lookups in the slice)."""
    rows = session.execute(
        select(Job.finished_at, Job.cache_hits, Job.cache_misses)
        .where(Job.tenant_id == tenant_id, Job.finished_at.is_not(None), Job.cache_hits.is_not(None))
        .order_by(Job.finished_at)).all()
    rows = [r for r in rows if (r.cache_hits or 0) + (r.cache_misses or 0) > 0]
    if not rows:
        return []
    start, end = rows[0].finished_at, rows[-1].finished_at
    width = max((end - start) / buckets, timedelta(seconds=1))
    sums: dict[int, list] = {}
    for finished, hits, misses in rows:
        slot = sums.setdefault(min(int((finished - start) / width), buckets - 1), [finished, 0, 0])
        slot[0] = max(slot[0], finished)
        slot[1] += hits or 0
        slot[2] += (hits or 0) + (misses or 0)
    return [(when, hits / lookups) for _, (when, hits, lookups) in sorted(sums.items())]
