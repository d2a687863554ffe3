"""Uploaded ONNX models: content-addressed, checked by the compiler frontend before acceptance."""

from __future__ import annotations

from fastapi import APIRouter, Response, UploadFile

from server.api.deps import PageDep, SessionDep, SettingsDep, StorageDep, TenantDep
from server.api.schemas import ModelOut, Page
from server.db.models import Model
from server.services import models as service

router = APIRouter(prefix="/models", tags=["models"])


@router.post("", response_model=ModelOut, status_code=201,
             responses={200: {"description": "the same bytes were uploaded before"}})
def upload_model(file: UploadFile, response: Response, session: SessionDep, storage: StorageDep,
                 settings: SettingsDep, tenant: TenantDep) -> Model:
    """Upload an ONNX model (multipart field `file`); the same bytes return the same model."""
    model, created = service.upload_model(session, storage, settings, tenant, file.file, file.filename or "")
    if not created:
        response.status_code = 200
    return model


@router.get("", response_model=Page[ModelOut])
def list_models(session: SessionDep, tenant: TenantDep, page: PageDep) -> dict:
    """This tenant's models, newest first."""
    items, total = service.list_models(session, tenant, page.limit, page.offset)
    return page.of(items, total)


@router.get("/{model_id}", response_model=ModelOut)
def get_model(model_id: str, session: SessionDep, tenant: TenantDep) -> Model:
    """One model."""
    return service.get_model(session, tenant, model_id)


@router.delete("/{model_id}", status_code=204)
def delete_model(model_id: str, session: SessionDep, storage: StorageDep, tenant: TenantDep) -> Response:
    """Delete a model with its finished compilations and their artifacts (409 while one is active)."""
    service.delete_model(session, storage, tenant, model_id)
    return Response(status_code=204)


@router.post("/{model_id}/pin", response_model=ModelOut)
def pin_model(model_id: str, session: SessionDep, tenant: TenantDep) -> Model:
    """Pin a model: it and its compilations' artifacts never expire."""
    return service.set_pinned(session, tenant, model_id, True)


@router.post("/{model_id}/unpin", response_model=ModelOut)
def unpin_model(model_id: str, session: SessionDep, tenant: TenantDep) -> Model:
    """Unpin a model: it and its artifacts expire again after their retention age."""
    return service.set_pinned(session, tenant, model_id, False)
