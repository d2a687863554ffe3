"""Uploaded ONNX models: content-addressed per tenant, checked by the compiler frontend
before they are accepted, deleted with their finished compilations and artifacts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from compiler.errors import ModelError
from compiler.frontend import Limits, check_model
from server.blobs import delete_unreferenced
from server.core.config import Settings
from server.db.models import TERMINAL, Artifact, Job, Model, RunJob, Tenant
from server.services.errors import ServiceError, owned
from server.services.quotas import check_upload
from server.storage import BlobTooLarge, Storage, StorageFull


def upload_model(session: Session, storage: Storage, settings: Settings, tenant: Tenant,
                 stream: BinaryIO, filename: str) -> tuple[Model, bool]:
    """Store and check an upload; (the model, whether it is new). The same bytes give the
    tenant's existing model; a model the frontend refuses raises ModelError, one over the
    tenant's quotas ServiceError (403 / 413), and neither leaves a blob."""
    try:
        blob = storage.put(stream, settings.max_upload_bytes)
    except BlobTooLarge:
        raise ServiceError(413, f"model is larger than the upload limit of {settings.max_upload_bytes} "
                                "bytes (TILEFORGE_MAX_UPLOAD_BYTES)") from None
    except StorageFull as e:
        raise ServiceError(507, f"model not stored: {e}") from None
    existing = _by_sha(session, tenant, blob.sha256)
    if existing is not None:
        return existing, False
    try:
        check_upload(session, settings, tenant, blob.size)
        with storage.open(blob.sha256) as f:
            info = check_model(f.read(), Limits(max_nodes=settings.max_model_nodes))  # lowered too where shapes are known: refused, not stored
    except (ModelError, ServiceError):
        delete_unreferenced(session, storage, [blob.sha256])
        raise
    model = Model(tenant_id=tenant.id, sha256=blob.sha256, filename=filename[:255],
                  size=blob.size, inputs=info.inputs, outputs=info.outputs,
                  op_histogram=info.op_histogram, parameters=info.parameters, opset=info.opset)
    session.add(model)
    try:
        session.commit()
    except IntegrityError:  # the same bytes, uploaded concurrently by this tenant
        session.rollback()
        found = _by_sha(session, tenant, blob.sha256)
        assert found is not None
        return found, False
    return model, True


def _by_sha(session: Session, tenant: Tenant, sha256: str) -> Model | None:
    return session.scalar(select(Model).where(Model.tenant_id == tenant.id, Model.sha256 == sha256))


def list_models(session: Session, tenant: Tenant, limit: int, offset: int) -> tuple[Sequence[Model], int]:
    """A page of the tenant's models, newest first, and how many there are."""
    where = Model.tenant_id == tenant.id
    items = session.scalars(select(Model).where(where).order_by(Model.created_at.desc(), Model.id)
                            .limit(limit).offset(offset)).all()
    return items, session.scalar(select(func.count()).select_from(Model).where(where)) or 0


def get_model(session: Session, tenant: Tenant, model_id: str) -> Model:
    """One of the tenant's models (404 otherwise)."""
    return owned(session, Model, model_id, tenant, "model")


def delete_model(session: Session, storage: Storage, tenant: Tenant, model_id: str) -> None:
    """Delete a model with its finished jobs (compilations, profiles, inferences), their artifacts
    and their inputs and outputs (409 while one is active)."""
    model = get_model(session, tenant, model_id)
    active = session.scalar(select(func.count()).select_from(Job)
                            .where(Job.model_id == model.id, Job.status.not_in(TERMINAL)))
    if active:
        raise ServiceError(409, f"model {model_id!r} has {active} queued or running job(s); "
                                "cancel them first")
    blobs = delete_model_rows(session, model)
    session.commit()
    delete_unreferenced(session, storage, blobs)


def delete_model_rows(session: Session, model: Model) -> list[str]:
    """Delete a model's row with its jobs and their artifacts (not yet committed); returns the
    blobs they referred to, for the caller to delete once the rows are gone for good."""
    job_ids = select(Job.id).where(Job.model_id == model.id)
    blobs = [model.sha256, *session.scalars(select(Artifact.sha256).where(Artifact.job_id.in_(job_ids)))]
    for run in session.scalars(select(RunJob).where(RunJob.job_id.in_(job_ids))):  # inference inputs and outputs
        blobs += [sha for sha in (run.inputs_sha256, run.outputs_sha256) if sha]
    session.execute(delete(Artifact).where(Artifact.job_id.in_(job_ids)))
    session.execute(delete(Job).where(Job.model_id == model.id))
    session.delete(model)
    return blobs


def set_pinned(session: Session, tenant: Tenant, model_id: str, pinned: bool) -> Model:
    """Pin a model (it and its artifacts never expire) or unpin it; returns the model."""
    model = get_model(session, tenant, model_id)
    model.pinned = pinned
    session.commit()
    return model
