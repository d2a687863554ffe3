"""Idempotency keys: a client sends `Idempotency-Key` with a submission, so that a retry
whose first answer was lost (a dropped connection, a timeout) gets the jobs the first
attempt created, not a second set. Keys are per tenant; one reused for a different
request is refused rather than silently answered with someone else's jobs."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from server.db.models import IdempotencyKey, Job, Tenant
from server.services.errors import ServiceError


def request_sha256(request: dict[str, Any]) -> str:
    """A fingerprint of a request body (canonical JSON), to tell a retry from a reuse."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def replayed_jobs(session: Session, tenant: Tenant, key: str, fingerprint: str) -> list[Job] | None:
    """The jobs an earlier request with this key created, or None if the key is new
    (422 when the key was used for a different request)."""
    row = session.scalar(select(IdempotencyKey).where(IdempotencyKey.tenant_id == tenant.id,
                                                      IdempotencyKey.key == key))
    if row is None:
        return None
    if row.request_sha256 != fingerprint:
        raise ServiceError(422, "Idempotency-Key was already used for a different request; "
                                "send a new key for a new submission")
    jobs = {job.id: job for job in session.scalars(select(Job).where(Job.id.in_(row.job_ids)))}
    return [jobs[i] for i in row.job_ids if i in jobs]


def remember(session: Session, tenant: Tenant, key: str, fingerprint: str, jobs: list[Job]) -> None:
    """Record `key` for `jobs` (ids set, all of one model) in the session's transaction: the
    unique (tenant, key) makes the second of two racing requests fail to commit."""
    session.add(IdempotencyKey(tenant_id=tenant.id, key=key, request_sha256=fingerprint,
                               model_id=jobs[0].model_id, job_ids=[job.id for job in jobs]))


def forget(session: Session, tenant: Tenant, key: str) -> None:
    """Drop `key` (its jobs could not be queued: a retry should try again, not replay a failure)."""
    session.execute(delete(IdempotencyKey).where(IdempotencyKey.tenant_id == tenant.id,
                                                 IdempotencyKey.key == key))
    session.commit()
