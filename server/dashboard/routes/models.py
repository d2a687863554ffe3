"""The tenant's models: list with the upload form, one model, and starting compilations.

Uploading and compiling call the API's own route functions with the cookie's
tenant, so the dashboard applies exactly the checks and limits of `/v1`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from compiler.errors import ModelError
from compiler.target import list_targets
from server.api.deps import JobQueueDep, SessionDep, SettingsDep, StorageDep
from server.api.upload_limit import MULTIPART_OVERHEAD
from server.core.config import Settings
from server.dashboard.auth import CookieTenantDep, SameOriginDep
from server.dashboard.charts.bars import bar_chart
from server.dashboard.queries import jobs as job_queries
from server.dashboard.queries import models as q
from server.dashboard.queries import runs as run_queries
from server.dashboard.templating import not_found_page, render
from server.db.models import Tenant
from server.jobs.queue import JobQueue
from server.services import compilations, models
from server.services.errors import ServiceError
from server.storage import Storage

router = APIRouter()

PER_PAGE = 25


def _models_page(request: Request, session: Session, tenant: Tenant, page: int = 1,
                 error: str | None = None, status_code: int = 200) -> Response:
    return render(request, "models.html", status_code=status_code, tenant=tenant, nav="models",
                  rows=q.model_page(session, tenant.id, page=page, per_page=PER_PAGE),
                  targets=list_targets(), error=error)


def _compile(session: Session, queue: JobQueue, tenant: Tenant, model_id: str, target: str) -> str:
    """Queue a compilation (the service the API's route calls too); returns the job id."""
    return compilations.create_compilation(session, queue, tenant, model_id, target, {}).id


def _problem(e: Exception) -> str:
    return e.detail if isinstance(e, ServiceError) else str(e)


@router.get("/models")
def models_page(request: Request, session: SessionDep, tenant: CookieTenantDep, page: int = 1) -> Response:
    """The tenant's models and the upload form."""
    return _models_page(request, session, tenant, page)


def _upload_and_compile(request: Request, session: Session, storage: Storage, settings: Settings,
                        queue: JobQueue, tenant: Tenant, file: UploadFile, target: str) -> Response:
    try:
        model, _ = models.upload_model(session, storage, settings, tenant, file.file, file.filename or "")
        job_id = _compile(session, queue, tenant, model.id, target)
    except (ServiceError, ModelError) as e:
        session.rollback()
        status = e.status if isinstance(e, ServiceError) else 422
        return _models_page(request, session, tenant, error=_problem(e), status_code=status)
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)


@router.post("/models", dependencies=[SameOriginDep])
async def upload_and_compile(request: Request, session: SessionDep, storage: StorageDep,
                             settings: SettingsDep, queue: JobQueueDep, tenant: CookieTenantDep) -> Response:
    """Upload a model (form fields `file`, `target`) and start its compilation; then show the job."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > settings.max_upload_bytes + MULTIPART_OVERHEAD:
        # Refused before the body is read, like the API's own upload limit on /v1/models.
        return await run_in_threadpool(
            _models_page, request, session, tenant, error=f"model is larger than the upload limit of "
            f"{settings.max_upload_bytes} bytes (TILEFORGE_MAX_UPLOAD_BYTES)", status_code=413)
    async with request.form(max_files=1, max_fields=4) as form:
        file, target = form.get("file"), form.get("target") or "cpu"
        if not isinstance(file, UploadFile):
            return await run_in_threadpool(_models_page, request, session, tenant,
                                           error="choose an ONNX file to upload", status_code=422)
        return await run_in_threadpool(_upload_and_compile, request, session, storage, settings, queue,
                                       tenant, file, str(target))


def _model_page(request: Request, session: Session, tenant: Tenant, model_id: str,
                error: str | None = None, status_code: int = 200) -> Response:
    model = q.get_model(session, tenant.id, model_id)
    if model is None:
        return not_found_page(request, tenant, "models", "model", model_id)
    histogram = sorted((model.op_histogram or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    return render(request, "model.html", status_code=status_code, tenant=tenant, nav="models",
                  model=model, histogram_chart=bar_chart(histogram, "Operators in this model"),
                  jobs=job_queries.jobs_of_model(session, tenant.id, model.id), targets=list_targets(),
                  variants=run_queries.variants(session, tenant.id, model.id), error=error)


@router.get("/models/{model_id}")
def model_page(model_id: str, request: Request, session: SessionDep, tenant: CookieTenantDep) -> Response:
    """One model: inputs, outputs, op histogram, its variants (one per target) and the jobs that compiled it."""
    return _model_page(request, session, tenant, model_id)


@router.post("/models/{model_id}/compile", dependencies=[SameOriginDep])
def compile_model_again(model_id: str, request: Request, session: SessionDep, queue: JobQueueDep,
                        tenant: CookieTenantDep, target: Annotated[str, Form()] = "cpu") -> Response:
    """Start another compilation of an uploaded model; then show the job."""
    try:
        job_id = _compile(session, queue, tenant, model_id, target)
    except (ServiceError, ModelError) as e:
        session.rollback()
        return _model_page(request, session, tenant, model_id, error=_problem(e), status_code=422)
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)
