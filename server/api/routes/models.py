"""Uploaded ONNX models: content-addressed, checked by the compiler frontend before acceptance."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, UploadFile
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from compiler.errors import ModelError
from compiler.frontend import inspect_model
from server.api.deps import PageDep, SessionDep, SettingsDep, StorageDep, TenantDep, owned_or_404
from server.api.schemas import ModelOut, Page
from server.blobs import delete_unreferenced
from server.db.models import TERMINAL, Artifact, Job, Model
from server.storage import BlobTooLarge

router = APIRouter(prefix="/models", tags=["models"])


@router.post("", response_model=ModelOut, status_code=201,
             responses={200: {"description": "the same bytes were uploaded before"}})
def upload_model(file: UploadFile, response: Response, session: SessionDep, storage: StorageDep,
                 settings: SettingsDep, tenant: TenantDep) -> Model:
    """Upload an ONNX model (multipart field `file`); the same bytes return the same model."""
    try:
        blob = storage.put(file.file, settings.max_upload_bytes)
    except BlobTooLarge:
        raise HTTPException(413, f"model is larger than the upload limit of {settings.max_upload_bytes} "
                                 "bytes (TILEFORGE_MAX_UPLOAD_BYTES)") from None
    existing = session.scalar(select(Model).where(Model.tenant_id == tenant.id, Model.sha256 == blob.sha256))
    if existing is not None:
        response.status_code = 200
        return existing
    try:
        with storage.open(blob.sha256) as f:
            info = inspect_model(f.read())
    except ModelError:
        delete_unreferenced(session, storage, [blob.sha256])
        raise
    model = Model(tenant_id=tenant.id, sha256=blob.sha256, filename=(file.filename or "")[:255],
                  size=blob.size, inputs=info.inputs, outputs=info.outputs,
                  op_histogram=info.op_histogram, parameters=info.parameters, opset=info.opset)
    session.add(model)
    try:
        session.commit()
    except IntegrityError:  # the same bytes, uploaded concurrently by this tenant
        session.rollback()
        response.status_code = 200
        return session.scalars(select(Model).where(Model.tenant_id == tenant.id,
                                                   Model.sha256 == blob.sha256)).one()
    return model


@router.get("", response_model=Page[ModelOut])
def list_models(session: SessionDep, tenant: TenantDep, page: PageDep) -> dict:
    """This tenant's models, newest first."""
    where = Model.tenant_id == tenant.id
    items = session.scalars(select(Model).where(where).order_by(Model.created_at.desc(), Model.id)
                            .limit(page.limit).offset(page.offset)).all()
    return page.of(items, session.scalar(select(func.count()).select_from(Model).where(where)))


@router.get("/{model_id}", response_model=ModelOut)
def get_model(model_id: str, session: SessionDep, tenant: TenantDep) -> Model:
    """One model."""
    return owned_or_404(session, Model, model_id, tenant, "model")


@router.delete("/{model_id}", status_code=204)
def delete_model(model_id: str, session: SessionDep, storage: StorageDep, tenant: TenantDep) -> Response:
    """Delete a model with its finished compilations and their artifacts (409 while one is active)."""
    model = owned_or_404(session, Model, model_id, tenant, "model")
    active = session.scalar(select(func.count()).select_from(Job)
                            .where(Job.model_id == model.id, Job.status.not_in(TERMINAL)))
    if active:
        raise HTTPException(409, f"model {model_id!r} has {active} queued or running compilation(s); "
                                 "cancel them first")
    job_ids = select(Job.id).where(Job.model_id == model.id)
    blobs = [model.sha256, *session.scalars(select(Artifact.sha256).where(Artifact.job_id.in_(job_ids)))]
    session.execute(delete(Artifact).where(Artifact.job_id.in_(job_ids)))
    session.execute(delete(Job).where(Job.model_id == model.id))
    session.delete(model)
    session.commit()
    delete_unreferenced(session, storage, blobs)
    return Response(status_code=204)

