"""What /metrics reports about jobs and the kernel cache, read from the database at scrape
time: every API process answers the same numbers, whichever of them is scraped, and none
is lost when a process restarts (no counter lives in a process's memory)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.db.models import Job, JobStatus

# Upper bounds of the stage-duration buckets, in seconds: a cache-hit stage takes
# milliseconds, a cold build of a large model minutes.
STAGE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


@dataclass
class StageHistogram:
    """Durations of one pipeline stage over every job that recorded it."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(STAGE_BUCKETS))  # not cumulative
    count: int = 0
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        """Count one stage's duration in its bucket."""
        self.count += 1
        self.total += seconds
        for i, bound in enumerate(STAGE_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1
                return

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus's buckets: (upper bound, observations at or below it), ending with +Inf."""
        out, running = [], 0
        for bound, n in zip(STAGE_BUCKETS, self.buckets, strict=True):
            running += n
            out.append((repr(bound), running))
        return [*out, ("+Inf", self.count)]


@dataclass
class JobMetrics:
    """One scrape's worth of job and cache numbers."""

    by_state: dict[tuple[str, str], int]  # (kind, status) -> jobs
    queued: dict[tuple[str, bool], int]  # (target kind, held) -> queued jobs
    stages: dict[str, StageHistogram]
    cache_hits: int
    cache_misses: int


def job_metrics(session: Session) -> JobMetrics:
    """Jobs by kind and state, queued jobs by target kind (sent to the broker, or held by
    fair dispatch), stage durations and kernel cache hits and misses of every job in the
    database."""
    by_state = {(kind, status): n for kind, status, n in session.execute(
        select(Job.kind, Job.status, func.count()).group_by(Job.kind, Job.status))}
    for status in JobStatus:  # every state appears, at 0 when no job is in it
        by_state.setdefault(("compile", status.value), 0)
    queued = Counter({(kind, bool(held)): n for kind, held, n in session.execute(
        select(Job.target_kind, Job.held, func.count()).where(Job.status == JobStatus.queued)
        .group_by(Job.target_kind, Job.held))})
    hits, misses = session.execute(
        select(func.coalesce(func.sum(Job.cache_hits), 0), func.coalesce(func.sum(Job.cache_misses), 0))).one()
    stages: dict[str, StageHistogram] = {}
    # Only the one JSON column is read, a page at a time, so a large history costs memory
    # for one page, not for every row.
    rows = session.execute(select(Job.stage_seconds).where(Job.stage_seconds.is_not(None))
                           .execution_options(yield_per=1000)).scalars()
    for seconds in rows:
        for stage, value in (seconds or {}).items():
            stages.setdefault(stage, StageHistogram()).observe(float(value))
    return JobMetrics(by_state, dict(queued), stages, int(hits), int(misses))
