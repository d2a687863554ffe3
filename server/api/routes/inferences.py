"""Inference jobs: run an artifact on a worker of its target on the user's own inputs (.npz)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, UploadFile
from fastapi.responses import StreamingResponse

from server.api.deps import (
    IdempotencyKeyHeader,
    JobQueueDep,
    SessionDep,
    SettingsDep,
    StorageDep,
    TenantDep,
)
from server.api.schemas import InferenceOut
from server.api.views import inference_out
from server.db.models import JobKind
from server.services import runs as service

router = APIRouter(prefix="/inferences", tags=["inferences"])


@router.post("", response_model=InferenceOut, status_code=202)
def create_inference(artifact_id: Annotated[str, Form(min_length=1)], inputs: UploadFile, session: SessionDep,
                     storage: StorageDep, settings: SettingsDep, queue: JobQueueDep,
                     tenant: TenantDep, idempotency_key: IdempotencyKeyHeader = None) -> InferenceOut:
    """Queue a run of an artifact on the arrays of `inputs` (an .npz, one array per model input;
    422 names a missing, unexpected or mis-shaped array, 413 one over TILEFORGE_MAX_INFERENCE_BYTES)."""
    job, run = service.create_inference(session, storage, settings, queue, tenant, artifact_id, inputs.file,
                                        idempotency_key)
    return inference_out(job, run)


@router.get("/{job_id}", response_model=InferenceOut)
def get_inference(job_id: str, session: SessionDep, tenant: TenantDep) -> InferenceOut:
    """An inference's status; once it has succeeded, `outputs_url` says where its outputs are."""
    return inference_out(*service.get_run(session, tenant, job_id, JobKind.inference))


@router.get("/{job_id}/outputs", response_class=StreamingResponse,
            responses={200: {"content": {"application/octet-stream": {}},
                             "description": "the outputs as an .npz, one array per model output"}})
def inference_outputs(job_id: str, session: SessionDep, storage: StorageDep, tenant: TenantDep) -> StreamingResponse:
    """Download an inference's outputs (.npz; 409 until it has succeeded)."""
    return service.outputs_download(session, storage, tenant, job_id)
