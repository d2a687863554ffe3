"""Blob lifetime: a blob is removed from storage once no model, artifact or profile/inference row refers to it."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from server.db.models import Artifact, Model, RunJob
from server.storage import Storage


def delete_unreferenced(session: Session, storage: Storage, sha256s: Iterable[str]) -> None:
    """Delete each blob that no row refers to any more (the same bytes may belong to other tenants)."""
    for sha in set(sha256s):
        used = session.scalar(select(Model.id).where(Model.sha256 == sha).limit(1)) or \
            session.scalar(select(Artifact.id).where(Artifact.sha256 == sha).limit(1)) or \
            session.scalar(select(RunJob.job_id).where(or_(RunJob.inputs_sha256 == sha,
                                                           RunJob.outputs_sha256 == sha)).limit(1))
        if not used:
            storage.delete(sha)
