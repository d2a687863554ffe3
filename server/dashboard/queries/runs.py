"""A model's variants (its latest compilation per target, side by side) and a tenant's
profile jobs, for the dashboard."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.db.models import Artifact, Job, JobKind, JobStatus, Model, RunJob


@dataclass(frozen=True)
class Variant:
    """One target's build of a model: its latest compile job, the artifact, and its latest
    succeeded profile (if any)."""

    job: Job
    artifact: Artifact | None
    profile: RunJob | None

    @property
    def kernels(self) -> int | None:
        """How many kernels the artifact launches (None without an artifact)."""
        return None if self.artifact is None else len(self.artifact.report.get("kernels") or [])

    @property
    def kernels_us(self) -> float | None:
        """The kernels' summed time from the report: each kernel's top-k measurement, or its
        estimate where it was not measured (a cache hit measured earlier keeps its time)."""
        if self.artifact is None:
            return None
        times = [k.get("measured_us") or k.get("estimated_us") for k in self.artifact.report.get("kernels") or []]
        return sum(t for t in times if t) or None

    @property
    def profiled_us(self) -> float | None:
        """The median latency of the artifact's latest succeeded profile."""
        return None if self.profile is None else (self.profile.result or {}).get("median_us")


def variants(session: Session, tenant_id: str, model_id: str) -> list[Variant]:
    """The model's latest compilation per target, in target order."""
    jobs = session.scalars(select(Job).where(Job.tenant_id == tenant_id, Job.model_id == model_id,
                                             Job.kind == JobKind.compile)
                           .order_by(Job.created_at.desc(), Job.id)).all()
    latest: dict[str, Job] = {}
    for job in jobs:
        latest.setdefault(job.target, job)
    artifacts = {a.job_id: a for a in session.scalars(select(Artifact).where(
        Artifact.job_id.in_([j.id for j in latest.values()])))}
    profiles: dict[str, RunJob] = {}
    for run in session.scalars(select(RunJob).join(Job, Job.id == RunJob.job_id).where(
            RunJob.artifact_id.in_([a.id for a in artifacts.values()]), Job.kind == JobKind.profile,
            Job.status == JobStatus.succeeded).order_by(Job.finished_at.desc())):
        profiles.setdefault(run.artifact_id, run)
    out = []
    for target in sorted(latest):
        artifact = artifacts.get(latest[target].id)
        out.append(Variant(latest[target], artifact, profiles.get(artifact.id) if artifact else None))
    return out


@dataclass(frozen=True)
class ProfileRow:
    """A profile job with what it ran and found, and the model it belongs to."""

    job: Job
    run: RunJob
    model: Model


def get_profile(session: Session, tenant_id: str, job_id: str) -> ProfileRow | None:
    """The tenant's profile job `job_id`; another tenant's is as absent as a missing one."""
    job = session.get(Job, job_id)
    if job is None or job.tenant_id != tenant_id or job.kind != JobKind.profile:
        return None
    return ProfileRow(job, session.get(RunJob, job.id), session.get(Model, job.model_id))

