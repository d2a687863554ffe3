"""Built artifacts: streamed with their sha256."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from server.api.deps import SessionDep, StorageDep, TenantDep
from server.services.artifacts import SHA256_HEADER, artifact_download, get_artifact

router = APIRouter(prefix="/artifacts", tags=["artifacts"])


@router.get("/{artifact_id}", response_class=StreamingResponse,
            responses={200: {"content": {"application/gzip": {}},
                             "description": f"the artifact (.tar.gz); its sha256 in `{SHA256_HEADER}`"}})
def download_artifact(artifact_id: str, session: SessionDep, storage: StorageDep,
                      tenant: TenantDep) -> StreamingResponse:
    """Download an artifact (.tar.gz) for `compiler.runtime.load`."""
    return artifact_download(storage, get_artifact(session, tenant, artifact_id))


@router.get("/{artifact_id}/report")
def artifact_report(artifact_id: str, session: SessionDep, tenant: TenantDep) -> dict:
    """The artifact's report.json: per kernel config, times, cache hit or miss; validation."""
    return get_artifact(session, tenant, artifact_id).report
