"""Built artifacts: looked up for their tenant, streamed with their sha256."""

from __future__ import annotations

from sqlalchemy.orm import Session
from starlette.responses import StreamingResponse

from server.db.models import Artifact, Tenant
from server.services.errors import owned
from server.storage import Storage

SHA256_HEADER = "X-Artifact-SHA256"


def get_artifact(session: Session, tenant: Tenant, artifact_id: str) -> Artifact:
    """One of the tenant's artifacts (404 otherwise)."""
    return owned(session, Artifact, artifact_id, tenant, "artifact")


def artifact_download(storage: Storage, artifact: Artifact) -> StreamingResponse:
    """The artifact's bytes as a download, its sha256 in `SHA256_HEADER`."""
    return StreamingResponse(
        storage.iter_chunks(artifact.sha256), media_type="application/gzip",
        headers={SHA256_HEADER: artifact.sha256, "Content-Length": str(artifact.size),
                 "Content-Disposition": f'attachment; filename="{artifact.id}.tar.gz"'})
