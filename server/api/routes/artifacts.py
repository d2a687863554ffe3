"""Built artifacts: streamed with their sha256."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from server.api.deps import SessionDep, StorageDep, TenantDep, owned_or_404
from server.db.models import Artifact

router = APIRouter(prefix="/artifacts", tags=["artifacts"])

SHA256_HEADER = "X-Artifact-SHA256"


@router.get("/{artifact_id}", response_class=StreamingResponse,
            responses={200: {"content": {"application/gzip": {}},
                             "description": f"the artifact (.tar.gz); its sha256 in `{SHA256_HEADER}`"}})
def download_artifact(artifact_id: str, session: SessionDep, storage: StorageDep,
                      tenant: TenantDep) -> StreamingResponse:
    """Download an artifact (.tar.gz) for `compiler.runtime.load`."""
    artifact = owned_or_404(session, Artifact, artifact_id, tenant, "artifact")
    return StreamingResponse(
        storage.iter_chunks(artifact.sha256), media_type="application/gzip",
        headers={SHA256_HEADER: artifact.sha256, "Content-Length": str(artifact.size),
                 "Content-Disposition": f'attachment; filename="{artifact.id}.tar.gz"'})


@router.get("/{artifact_id}/report")
def artifact_report(artifact_id: str, session: SessionDep, tenant: TenantDep) -> dict:
    """The artifact's report.json: per kernel config, times, cache hit or miss; validation."""
    return owned_or_404(session, Artifact, artifact_id, tenant, "artifact").report
