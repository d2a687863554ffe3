"""One attempt at one job: claim it, do its work (compile with the database kernel cache and
store the artifact; or profile or run an artifact: worker/artifact_runs.py) while
reporting progress and renewing the lease, record the outcome."""

from __future__ import annotations

import contextvars
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded

from compiler.errors import ArtifactError, ModelError
from compiler.pipeline import CompileResult, compile_model
from server.core import log_context
from server.db.models import Job, JobKind, JobStatus, Model, Tenant
from server.db.session import transaction
from server.jobs import state
from server.services.errors import ServiceError
from server.storage import StorageFull
from worker.artifact_runs import run_inference, run_profile
from worker.context import WorkerContext
from worker.transient import TRANSIENT_ERRORS

log = logging.getLogger(__name__)


class JobCancelled(Exception):
    """The user cancelled the job; raised from the progress callback between stages."""


class JobReporter:
    """The progress callback: writes stage and progress, renews the lease, notices cancellation.

    A background thread also renews the lease, so a long stage does not look like a
    dead worker.
    """

    def __init__(self, ctx: WorkerContext, job_id: str, attempt: int) -> None:
        self.ctx, self.job_id, self.attempt = ctx, job_id, attempt
        self.lease = ctx.settings.job_lease_seconds
        self.cancelled = False
        self.lost = False
        self.seconds: dict[str, float] = {}  # per finished stage, so a failed job shows where time went
        self._stage: str | None = None
        self._since = time.perf_counter()
        self._stop = threading.Event()
        # A thread starts with an empty context: its lines carry the job's fields only if it
        # runs in a copy of this one.
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(self._heartbeat,),
                                        daemon=True, name=f"lease-{job_id}")

    def __enter__(self) -> JobReporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _renew(self, **values) -> None:
        try:
            with transaction(self.ctx.sessions) as s:
                self.cancelled = state.renew(s, self.job_id, self.attempt, self.lease, **values) or self.cancelled
        except state.LeaseLost:
            self.lost = True

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.lease / 4):
            try:
                self._renew()
            except Exception as e:  # a missed beat is survivable; the next one may work
                log.warning("lease renewal of job %s failed: %s", self.job_id, e)

    def __call__(self, stage: str, fraction: float) -> None:
        now = time.perf_counter()
        if self._stage is not None:
            self.seconds[self._stage] = round(now - self._since, 4)
        self._stage, self._since = stage, now
        if stage != "done":
            self._renew(stage=stage, progress=round(min(max(fraction, 0.0), 1.0), 4),
                        stage_seconds=dict(self.seconds))
        if self.lost:
            raise state.LeaseLost(self.job_id)
        if self.cancelled:
            raise JobCancelled(self.job_id)


# What each kind of job does once claimed: (context, job, attempt, progress, scratch folder).
Work = Callable[[WorkerContext, Job, int, Callable[[str, float], None], Path], None]
# How a job of each kind is named in its error messages.
NOUNS = {JobKind.compile: "compilation", JobKind.profile: "profile", JobKind.inference: "inference"}


def run_job(ctx: WorkerContext, job_id: str, worker: str, task_id: str) -> str:
    """Run one attempt of `job_id` (of any kind); returns the outcome. Transient faults propagate (to be retried)."""
    with transaction(ctx.sessions) as s:
        attempt = state.claim(s, job_id, worker, task_id, ctx.settings.job_lease_seconds)
    if attempt is None:
        return "skipped: not queued (finished, cancelled, or running elsewhere)"
    with ctx.sessions() as s:
        job = s.get(Job, job_id)
        log_context.add(job_id=job_id, tenant=s.get(Tenant, job.tenant_id).name)
    log.info("job %s: attempt %d, %s for %s", job_id, attempt, job.kind, job.target)
    work: dict[str, Work] = {JobKind.compile: _compile, JobKind.profile: run_profile,
                             JobKind.inference: run_inference}
    try:
        with _soft_limit_unwrapped(), JobReporter(ctx, job_id, attempt) as reporter, \
                tempfile.TemporaryDirectory(prefix="tileforge-job-") as tmp:
            work[job.kind](ctx, job, attempt, reporter, Path(tmp))
        return "succeeded"
    except state.LeaseLost:
        return "abandoned: the job was taken over after this worker's lease ran out"
    except JobCancelled:
        _end(ctx, job_id, attempt, JobStatus.cancelled, error=None)
        return "cancelled"
    except (ModelError, ArtifactError, ServiceError) as e:  # the model, the artifact or the inputs
        _end(ctx, job_id, attempt, JobStatus.failed, error=str(e))
        return "failed: the model"
    except StorageFull as e:
        _end(ctx, job_id, attempt, JobStatus.failed, error=f"the artifact could not be stored: {e}")
        return "failed: artifact store full"
    except SoftTimeLimitExceeded:
        limit = ctx.settings.job_soft_time_limit
        _end(ctx, job_id, attempt, JobStatus.failed, error=f"{NOUNS[job.kind]} exceeded the time limit of {limit} s")
        return "failed: time limit"
    except TRANSIENT_ERRORS as e:
        _release(ctx, job_id, attempt, e)
        raise
    except Exception as e:  # ours and not transient: fail with the reason, do not retry
        log.exception("job %s failed", job_id)
        _end(ctx, job_id, attempt, JobStatus.failed, error=f"compiler error: {type(e).__name__}: {e}")
        return "failed: internal"


@contextmanager
def _soft_limit_unwrapped() -> Iterator[None]:
    """Raise Celery's soft time limit bare when a library that was running as it fired wrapped it.

    The limit is raised wherever the task happens to be; when that is inside SQLAlchemy
    (preparing a statement of the kernel cache, say) it comes out as a StatementError caused
    by it, and the job would fail as a compiler error instead of naming the limit.
    """
    try:
        yield
    except Exception as e:
        limit = _soft_limit_behind(e)
        if limit is None or limit is e:
            raise
        raise limit from e


def _soft_limit_behind(error: BaseException | None) -> SoftTimeLimitExceeded | None:
    """The soft time limit among `error` and the exceptions it was raised from or while handling
    (even where `raise ... from None` hid it: onnxruntime's errors become ModelErrors that way)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, SoftTimeLimitExceeded):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _compile(ctx: WorkerContext, job: Job, attempt: int, reporter: Callable[[str, float], None], tmp: Path) -> None:
    """Compile the job's model for its target and store the artifact."""
    with ctx.sessions() as s:
        model = s.get(Model, job.model_id)
    data = ctx.storage.open(model.sha256).read()
    result = compile_model(data, job.target, job.options, cache=ctx.kernel_cache_of(job.tenant_id), progress=reporter,
                           output=tmp / "artifact.tar.gz")
    _store(ctx, job, attempt, result)


def _store(ctx: WorkerContext, job: Job, attempt: int, result: CompileResult) -> None:
    """Put the artifact in storage first (atomically), then make it visible in one transaction."""
    with result.artifact_path.open("rb") as f:
        blob = ctx.storage.put(f)
    if blob.sha256 != result.artifact_sha256:
        raise RuntimeError(f"artifact changed on its way to storage ({blob.sha256} != {result.artifact_sha256})")
    with transaction(ctx.sessions) as s:
        state.succeed(s, job.id, attempt, job.tenant_id, blob, result.report,
                      stage_seconds=result.stage_seconds, cache_hits=result.cache_hits,
                      cache_misses=result.cache_misses, validation=result.validation or None)


def _end(ctx: WorkerContext, job_id: str, attempt: int, status: JobStatus, error: str | None) -> None:
    try:
        with transaction(ctx.sessions) as s:
            state.finish(s, job_id, attempt, status, error=error)
    except state.LeaseLost:
        log.warning("job %s was taken over before it could be marked %s", job_id, status)


def _release(ctx: WorkerContext, job_id: str, attempt: int, error: BaseException) -> None:
    try:
        with transaction(ctx.sessions) as s:
            state.release(s, job_id, attempt, f"retrying after a transient fault: {type(error).__name__}: {error}")
    except Exception as e:  # the database may be the fault; the reaper recovers the job
        log.warning("could not release job %s for retry: %s", job_id, e)
