"""Blob lifetime: a blob is removed from storage once no model or artifact row refers to it."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.db.models import Artifact, Model
from server.storage import Storage


def delete_unreferenced(session: Session, storage: Storage, sha256s: Iterable[str]) -> None:
    """Delete each blob that no row refers to any more (the same bytes may belong to other tenants)."""
    for sha in set(sha256s):
        used = session.scalar(select(Model.id).where(Model.sha256 == sha).limit(1)) or \
            session.scalar(select(Artifact.id).where(Artifact.sha256 == sha).limit(1))
        if not used:
            storage.delete(sha)
