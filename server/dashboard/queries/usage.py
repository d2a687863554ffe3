"""Which of a tenant's jobs used a kernel: each artifact's report lists its kernels' keys."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import String, cast, select
from sqlalchemy.orm import Session

from server.db.models import Artifact, Job, Model


@dataclass(frozen=True)
class KernelUse:
    """One job of the tenant whose artifact contains the kernel."""

    job: Job
    model: Model
    symbols: list[str]
    cache_hit: bool


def kernel_uses(session: Session, tenant_id: str, key: str, limit: int = 100) -> list[KernelUse]:
    """The tenant's jobs whose artifact report lists kernel `key`, newest first."""
    # The text match narrows the rows in SQL on any database; the report is then read
    # properly, so a key that only appears elsewhere in the JSON does not count.
    rows = session.execute(
        select(Artifact, Job, Model).join(Job, Job.id == Artifact.job_id).join(Model, Model.id == Job.model_id)
        .where(Artifact.tenant_id == tenant_id, cast(Artifact.report, String).contains(key, autoescape=True))
        .order_by(Artifact.created_at.desc()).limit(limit)).all()
    uses = []
    for artifact, job, model in rows:
        kernels = [k for k in (artifact.report or {}).get("kernels", []) if k.get("key") == key]
        if kernels:
            uses.append(KernelUse(job, model, [str(k.get("symbol", "")) for k in kernels],
                                  any(bool(k.get("cache_hit")) for k in kernels)))
    return uses
