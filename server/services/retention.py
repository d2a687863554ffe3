"""Retention: unpinned models and artifacts older than their settings allow are deleted, and
blobs no row refers to any more are swept from storage.

Rows go first, in one transaction, and their blobs after it commits: a crash in between
leaves an orphan blob, never a row that points at a missing one. Orphans (and the
temporary files of writes that never finished) are deleted by `delete_orphan_files` once
older than a grace period, which also keeps it clear of uploads still in flight: their
blob is written before their row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, exists, select, union
from sqlalchemy.orm import Session, sessionmaker

from server.blobs import delete_unreferenced
from server.core.config import Settings
from server.db.models import TERMINAL, Artifact, Job, Model
from server.db.session import transaction
from server.db.types import utcnow
from server.services.models import delete_model_rows
from server.storage import Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionPass:
    """What one retention pass deleted."""

    models: int = 0
    artifacts: int = 0
    orphan_files: int = 0


def _busy(model_id: object) -> object:
    """True where the model has a queued or running job (it is never expired then)."""
    return exists().where(Job.model_id == model_id, Job.status.not_in(TERMINAL))


def expire_models(sessions: sessionmaker[Session], storage: Storage, max_age_seconds: float,
                  now: datetime | None = None) -> int:
    """Delete each unpinned model created more than `max_age_seconds` ago, with its jobs and
    artifacts, unless it has a job queued or running; returns how many were deleted."""
    cutoff = (now or utcnow()) - timedelta(seconds=max_age_seconds)
    expired = (Model.pinned.is_(False), Model.created_at < cutoff, ~_busy(Model.id))
    with sessions() as s:
        ids = s.scalars(select(Model.id).where(*expired)).all()
    deleted = 0
    for model_id in ids:
        with transaction(sessions) as s:
            # Read again under a row lock: a pin or a new job since the listing keeps the model.
            model = s.scalar(select(Model).where(Model.id == model_id, *expired).with_for_update())
            if model is None:
                continue
            blobs = delete_model_rows(s, model)
        with sessions() as s:
            delete_unreferenced(s, storage, blobs)
        log.info("model %s expired (older than %s s, not pinned)", model_id, max_age_seconds)
        deleted += 1
    return deleted


def expire_artifacts(sessions: sessionmaker[Session], storage: Storage, max_age_seconds: float,
                     now: datetime | None = None) -> int:
    """Delete each artifact built more than `max_age_seconds` ago whose model is not pinned;
    returns how many (their jobs stay, succeeded, with no artifact to download)."""
    cutoff = (now or utcnow()) - timedelta(seconds=max_age_seconds)
    unpinned = select(Job.id).join(Model, Model.id == Job.model_id).where(Model.pinned.is_(False))
    where = (Artifact.created_at < cutoff, Artifact.job_id.in_(unpinned))
    with transaction(sessions) as s:
        blobs = s.scalars(select(Artifact.sha256).where(*where)).all()
        count = s.execute(delete(Artifact).where(*where)).rowcount
    if count:
        with sessions() as s:
            delete_unreferenced(s, storage, blobs)
        log.info("%d artifact(s) expired (older than %s s, model not pinned)", count, max_age_seconds)
    return count


def delete_orphan_files(sessions: sessionmaker[Session], storage: Storage, grace_seconds: float,
                        now: datetime | None = None) -> int:
    """Delete stored files older than `grace_seconds` that no model or artifact row refers to
    (left by a crash between a row's deletion and its blob's, or by an unfinished write)."""
    cutoff = (now or utcnow()).timestamp() - grace_seconds
    old = [f for f in storage.list_files() if f.modified < cutoff]  # listed first: newer blobs are kept
    with sessions() as s:
        referenced = set(s.scalars(union(select(Model.sha256), select(Artifact.sha256))).all())
    orphans = [f for f in old if f.sha256 not in referenced]
    for f in orphans:
        storage.delete_file(f)
    if orphans:
        log.info("deleted %d stored file(s) no row refers to", len(orphans))
    return len(orphans)


def sweep_retention(sessions: sessionmaker[Session], storage: Storage, settings: Settings) -> RetentionPass:
    """One retention pass as the settings ask (an age of 0 keeps forever)."""
    return RetentionPass(
        models=expire_models(sessions, storage, settings.model_retention_seconds)
        if settings.model_retention_seconds else 0,
        artifacts=expire_artifacts(sessions, storage, settings.artifact_retention_seconds)
        if settings.artifact_retention_seconds else 0,
        orphan_files=delete_orphan_files(sessions, storage, settings.orphan_blob_grace_seconds),
    )
