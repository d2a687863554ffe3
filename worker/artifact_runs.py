"""Profile and inference jobs: run a stored artifact on this worker (one of its target's).

A profile needs the artifact's plan (its kernels, their computations and tiles) to time
each kernel against the roofline; the plan is not in the artifact, so it is rebuilt from
the model with the compile job's options and the shared kernel cache (every kernel a
hit, no validation), and its kernels' keys must be those of the stored artifact.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import update

from compiler.errors import ArtifactError
from compiler.pipeline import compile_model
from compiler.profile import profile_artifact
from compiler.runtime import load
from compiler.runtime.artifact import read_artifact
from server.db.models import Artifact, Job, JobStatus, Model, RunJob
from server.db.session import transaction
from server.jobs import state
from server.services.npz import read_npz, write_npz
from worker.context import WorkerContext

Progress = Callable[[str, float], None]  # worker.runner.JobReporter


@dataclass
class RunInputs:
    """What a profile or inference job reads: its rows, and the artifact copied to local disk."""

    run: RunJob
    built: Job  # the compile job that built the artifact
    artifact: Path


def _inputs(ctx: WorkerContext, job: Job, tmp: Path) -> RunInputs:
    with ctx.sessions() as s:
        run = s.get(RunJob, job.id)
        artifact = s.get(Artifact, run.artifact_id)
        built = s.get(Job, artifact.job_id)
    path = tmp / "artifact.tar.gz"
    with ctx.storage.open(artifact.sha256) as src, path.open("wb") as out:
        shutil.copyfileobj(src, out)
    return RunInputs(run, built, path)


def _succeed(ctx: WorkerContext, job: Job, attempt: int, **found: object) -> None:
    """Mark the job succeeded and record what it found, in one transaction."""
    with transaction(ctx.sessions) as s:
        state.finish(s, job.id, attempt, JobStatus.succeeded, progress=1.0, stage="done")
        s.execute(update(RunJob).where(RunJob.job_id == job.id).values(**found))


def run_profile(ctx: WorkerContext, job: Job, attempt: int, progress: Progress, tmp: Path) -> None:
    """Time the job's artifact: first load, latency, memory, and each kernel's roofline."""
    given = _inputs(ctx, job, tmp)
    data = _model_bytes(ctx, job)
    progress("plan", 0.1)
    rebuilt = compile_model(data, job.target, {**given.built.options, "validate": False},
                            cache=ctx.kernel_cache_of(job.tenant_id),
                            output=tmp / "rebuilt.tar.gz")
    assert rebuilt.plan is not None and rebuilt.target is not None
    manifest, folder = read_artifact(given.artifact, tmp)
    shutil.rmtree(folder)
    if sorted(k["key"] for k in manifest["kernels"]) != sorted(k.key for k in rebuilt.plan.kernels):
        raise ArtifactError("the artifact's kernels are not those this worker's compiler plans for its model "
                            "(it was built by another compiler version); compile it again to profile it")
    progress("profile", 0.5)
    result = profile_artifact(given.artifact, rebuilt.plan, rebuilt.target, data, job.options["runs"],
                              job.options.get("threads"))
    _succeed(ctx, job, attempt, result=result)


def run_inference(ctx: WorkerContext, job: Job, attempt: int, progress: Progress, tmp: Path) -> None:
    """Run the job's artifact on its inputs (checked again against the loaded artifact) and
    store the outputs as an .npz."""
    given = _inputs(ctx, job, tmp)
    progress("load", 0.2)
    exe = load(given.artifact)
    with ctx.storage.open(given.run.inputs_sha256) as f:
        inputs = read_npz(f.read(), exe.input_specs)
    progress("run", 0.5)
    blob = ctx.storage.put(io.BytesIO(write_npz(exe.run(inputs))))
    _succeed(ctx, job, attempt, outputs_sha256=blob.sha256, outputs_size=blob.size)


def _model_bytes(ctx: WorkerContext, job: Job) -> bytes:
    with ctx.sessions() as s:
        sha256 = s.get(Model, job.model_id).sha256
    with ctx.storage.open(sha256) as f:
        return f.read()
