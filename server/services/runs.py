"""Profile and inference jobs: run one of the tenant's artifacts on a worker of its target.

They are rows of the `jobs` table of their own kind (so the lease, the reaper and the
republishing of lost messages cover them as they cover compile jobs), on the compile
job's model and target, with what they run and find in `run_jobs`.
"""

from __future__ import annotations

import io
from typing import BinaryIO

from sqlalchemy.orm import Session
from starlette.responses import StreamingResponse

from compiler.errors import ArtifactError
from compiler.runtime.artifact import peek_manifest
from compiler.runtime.executable import TensorSpec, specs_from_manifest
from server.core.config import Settings
from server.db.models import Artifact, Job, JobKind, JobStatus, RunJob, Tenant, new_id
from server.jobs.queue import JobQueue
from server.services.artifacts import get_artifact
from server.services.compilations import owned_job, submit_jobs
from server.services.errors import ServiceError
from server.services.idempotency import replayed_jobs, request_sha256
from server.services.npz import read_npz
from server.storage import Storage

NOUNS = {JobKind.profile: "profile", JobKind.inference: "inference"}


def create_profile(session: Session, queue: JobQueue, tenant: Tenant, artifact_id: str, runs: int,
                   threads: int | None, idempotency_key: str | None = None) -> tuple[Job, RunJob]:
    """Queue a profile of one of the tenant's artifacts: `runs` timed runs with `threads` CPU
    threads (a repeated `idempotency_key` returns the first request's job)."""
    artifact = get_artifact(session, tenant, artifact_id)
    return _create(session, queue, tenant, artifact, JobKind.profile, {"runs": runs, "threads": threads}, None,
                   idempotency_key)


def create_inference(session: Session, storage: Storage, settings: Settings, queue: JobQueue, tenant: Tenant,
                     artifact_id: str, inputs: BinaryIO, idempotency_key: str | None = None) -> tuple[Job, RunJob]:
    """Queue a run of one of the tenant's artifacts on the inputs of an .npz (at most
    `max_inference_bytes`; 413 above it, 422 naming any name, shape or dtype the
    artifact does not take; a repeated `idempotency_key` returns the first request's job)."""
    artifact = get_artifact(session, tenant, artifact_id)
    data = inputs.read(settings.max_inference_bytes + 1)
    if len(data) > settings.max_inference_bytes:
        raise ServiceError(413, f"inputs are larger than the limit of {settings.max_inference_bytes} bytes "
                                "(TILEFORGE_MAX_INFERENCE_BYTES)")
    read_npz(data, input_specs(storage, artifact))
    blob = storage.put(io.BytesIO(data))
    return _create(session, queue, tenant, artifact, JobKind.inference, {}, blob.sha256, idempotency_key)


def get_run(session: Session, tenant: Tenant, job_id: str, kind: JobKind) -> tuple[Job, RunJob]:
    """One of the tenant's profile or inference jobs (404 otherwise) with what it runs and found."""
    job = owned_job(session, tenant, job_id, kind, NOUNS[kind])
    return job, session.get(RunJob, job.id)


def outputs_download(session: Session, storage: Storage, tenant: Tenant, job_id: str) -> StreamingResponse:
    """An inference's outputs as an .npz download (409 until it has succeeded)."""
    job, run = get_run(session, tenant, job_id, JobKind.inference)
    if job.status != JobStatus.succeeded or run.outputs_sha256 is None:
        raise ServiceError(409, f"inference {job_id!r} is {job.status}; it has no outputs"
                                + (f": {job.error}" if job.error else ""))
    return StreamingResponse(storage.iter_chunks(run.outputs_sha256), media_type="application/octet-stream",
                             headers={"Content-Length": str(run.outputs_size),
                                      "Content-Disposition": f'attachment; filename="{job.id}-outputs.npz"'})


def input_specs(storage: Storage, artifact: Artifact) -> list[TensorSpec]:
    """The artifact's inputs (names, shapes, dtypes) from its manifest."""
    try:
        with storage.open(artifact.sha256) as f:
            return specs_from_manifest(peek_manifest(f), "inputs")
    except ArtifactError as e:
        raise ServiceError(409, f"artifact {artifact.id!r} cannot be run: {e}") from None


def _create(session: Session, queue: JobQueue, tenant: Tenant, artifact: Artifact, kind: JobKind,
            options: dict, inputs_sha256: str | None, idempotency_key: str | None) -> tuple[Job, RunJob]:
    """Queue a job of `kind` on the artifact's model and target (see module doc)."""
    fingerprint = request_sha256({"kind": kind, "artifact_id": artifact.id, "options": options,
                                  "inputs_sha256": inputs_sha256})
    if idempotency_key is not None:
        earlier = replayed_jobs(session, tenant, idempotency_key, fingerprint)
        if earlier is not None:
            return earlier[0], session.get(RunJob, earlier[0].id)
    built = session.get(Job, artifact.job_id)
    job = Job(id=new_id(), tenant_id=tenant.id, model_id=built.model_id, target=built.target,
              target_kind=built.target_kind, kind=kind, options=options, task_id=new_id())
    run = RunJob(job_id=job.id, artifact_id=artifact.id, inputs_sha256=inputs_sha256)
    job = submit_jobs(session, queue, tenant, [job], [run], fingerprint, idempotency_key)[0]
    return job, session.get(RunJob, job.id)
