"""How a compile job is shown: as JSON (`CompilationOut`), and as a stream of server-sent
events while it runs. Shared by the API's routes and the dashboard's (which call the
service layer, never each other)."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from server.api.schemas import CompilationOut, InferenceOut, ProfileOut, RunJobOut
from server.db.models import Artifact, Job, JobStatus, RunJob, Tenant
from server.services import compilations as service


def compilation_out(session: Session, job: Job) -> CompilationOut:
    """A job as the API shows it, with its artifact once there is one."""
    return with_artifact(job, service.artifact_of(session, job))


def with_artifact(job: Job, artifact: Artifact | None) -> CompilationOut:
    """`job` as the API shows it, given its artifact (or None)."""
    out = CompilationOut.model_validate(job)
    if artifact is not None:
        out.artifact_id, out.artifact_sha256 = artifact.id, artifact.sha256
    return out


def event_stream(request: Request, session: Session, tenant: Tenant, job_id: str) -> StreamingResponse:
    """The server-sent events of one of the tenant's compilations (the API's and the dashboard's)."""
    service.get_compilation(session, tenant, job_id)
    gate = request.app.state.gate

    async def snapshot() -> CompilationOut:  # a stream may last minutes: each poll has its own session
        return await gate.run(lambda s: compilation_out(s, s.get(Job, job_id)))

    return StreamingResponse(service.compilation_events(snapshot, request.app.state.settings.sse_poll_seconds),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})



def _run_fields(job: Job, run: RunJob) -> dict:
    """What a profile and an inference job show alike: the job's state and the artifact it runs."""
    return {name: getattr(job, name) for name in RunJobOut.model_fields if name != "artifact_id"} | {
        "artifact_id": run.artifact_id}


def profile_out(job: Job, run: RunJob) -> ProfileOut:
    """A profile job as the API shows it, with its measurements once it has succeeded."""
    return ProfileOut(**_run_fields(job, run), result=run.result if job.status == JobStatus.succeeded else None)


def inference_out(job: Job, run: RunJob) -> InferenceOut:
    """An inference job as the API shows it, with where its outputs are once it has succeeded."""
    done = job.status == JobStatus.succeeded
    return InferenceOut(**_run_fields(job, run), outputs_url=f"/v1/inferences/{job.id}/outputs" if done else None)
