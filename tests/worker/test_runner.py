"""One attempt of a compile job, run in-process with the real pipeline on the embedded database:
success, idempotent re-delivery, the user's errors, cancellation between stages, a lost lease,
and transient faults handed back for retry."""

import pytest
from service_kit import make_token
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from compiler.runtime.recorded import REFERENCE_PATTERN
from compiler.schedule.tilegraph.price_record import PRICES_PATTERN
from server.db.models import Artifact, Job, Kernel, Model, Tenant
from server.db.session import make_engine, make_sessionmaker, transaction
from server.jobs import state
from server.storage import LocalStorage
from worker.context import WorkerContext
from worker.kernel_cache import DatabaseKernelCache
from worker.runner import run_job


class HookedCache(DatabaseKernelCache):
    """The real database cache, with a hook run on the first lookup of a kernel (mid-compile,
    in `schedule`; onnxruntime's recorded run is looked up before it, after `lower`)."""

    def __init__(self, sessions, hook) -> None:
        super().__init__(sessions)
        self.hook, self.fired = hook, False

    def get(self, signature):
        if not self.fired and signature.op_pattern not in (REFERENCE_PATTERN, PRICES_PATTERN):  # a kernel
            self.fired = True
            self.hook()
        return super().get(signature)


@pytest.fixture
def ctx(embedded_settings):
    engine = make_engine(embedded_settings.db_url)
    sessions = make_sessionmaker(engine)
    yield WorkerContext(embedded_settings, sessions, LocalStorage(embedded_settings.storage_root),
                        DatabaseKernelCache(sessions))
    engine.dispose()


def _job(ctx, data: bytes, options: dict | None = None) -> str:
    import io

    make_token(ctx.settings, "alice")
    blob = ctx.storage.put(io.BytesIO(data))
    with transaction(ctx.sessions) as s:
        tenant_id = s.scalar(select(Tenant.id).where(Tenant.name == "alice"))
        model = Model(tenant_id=tenant_id, sha256=blob.sha256, size=blob.size, inputs=[], outputs=[],
                      op_histogram={}, parameters=0, opset=17)
        s.add(model)
        s.flush()
        job = Job(tenant_id=tenant_id, model_id=model.id, target="cpu", target_kind="cpu",
                  options=options or {}, task_id="t1")
        s.add(job)
        s.flush()
        return job.id


def _get(ctx, job_id) -> Job:
    with ctx.sessions() as s:
        return s.get(Job, job_id)


def _count(ctx, table, *where) -> int:
    with ctx.sessions() as s:
        return s.scalar(select(func.count()).select_from(table).where(*where))


def test_success_then_redelivery_does_nothing(ctx, onnx_models):
    job_id = _job(ctx, onnx_models.mlp(seed=41))
    assert run_job(ctx, job_id, "w1", "t1") == "succeeded"
    job = _get(ctx, job_id)
    assert (job.status, job.progress, job.attempts, job.lease_expires_at) == ("succeeded", 1.0, 1, None)
    kernels = _count(ctx, Kernel) - _count(ctx, Kernel, Kernel.op_pattern.in_([REFERENCE_PATTERN, PRICES_PATTERN]))
    assert job.cache_misses == kernels > 0 and job.validation["passed"]
    with ctx.sessions() as s:
        artifact = s.scalar(select(Artifact).where(Artifact.job_id == job_id))
    assert ctx.storage.exists(artifact.sha256) and artifact.report["kernels"]
    assert run_job(ctx, job_id, "w2", "t1").startswith("skipped")
    assert _get(ctx, job_id).worker == "w1" and _count(ctx, Artifact) == 1


def test_the_users_error_fails_the_job_without_retry(ctx, onnx_models):
    job_id = _job(ctx, onnx_models.mlp(seed=42), options={"input_shapes": {"nope": [1]}})
    assert run_job(ctx, job_id, "w1", "t1") == "failed: the model"
    job = _get(ctx, job_id)
    assert job.status == "failed" and "nope" in job.error and _count(ctx, Artifact) == 0


def test_cancellation_is_honoured_at_the_next_stage(ctx, onnx_models):
    job_id = _job(ctx, onnx_models.mlp(seed=43))

    def cancel():
        with transaction(ctx.sessions) as s:
            assert state.request_cancel(s, s.get(Job, job_id))

    ctx.kernel_cache = HookedCache(ctx.sessions, cancel)
    assert run_job(ctx, job_id, "w1", "t1") == "cancelled"
    job = _get(ctx, job_id)
    assert job.status == "cancelled" and job.stage == "codegen" and _count(ctx, Artifact) == 0


def test_a_worker_that_lost_its_lease_writes_nothing(ctx, onnx_models):
    job_id = _job(ctx, onnx_models.mlp(seed=44))

    def taken_over():  # the reaper re-queued the job and another worker claimed it
        with transaction(ctx.sessions) as s:
            s.execute(Job.__table__.update().where(Job.id == job_id).values(status="queued"))
            assert state.claim(s, job_id, "w2", "t2", 60) == 2

    ctx.kernel_cache = HookedCache(ctx.sessions, taken_over)
    assert run_job(ctx, job_id, "w1", "t1").startswith("abandoned")
    job = _get(ctx, job_id)
    assert (job.status, job.worker, job.attempts) == ("running", "w2", 2)
    assert _count(ctx, Artifact) == 0


def test_a_transient_fault_hands_the_job_back_for_retry(ctx, onnx_models):
    job_id = _job(ctx, onnx_models.mlp(seed=45))

    def database_blip():
        raise OperationalError("SELECT 1", {}, ConnectionResetError("connection reset by peer"))

    ctx.kernel_cache = HookedCache(ctx.sessions, database_blip)
    with pytest.raises(OperationalError):
        run_job(ctx, job_id, "w1", "t1")
    job = _get(ctx, job_id)
    assert job.status == "queued" and "transient fault" in job.error
    ctx.kernel_cache = DatabaseKernelCache(ctx.sessions)
    assert run_job(ctx, job_id, "w1", "t1") == "succeeded"
    assert _get(ctx, job_id).attempts == 2


def test_the_soft_time_limit_fails_the_job_with_the_reason(ctx, onnx_models):
    from celery.exceptions import SoftTimeLimitExceeded

    job_id = _job(ctx, onnx_models.mlp(seed=46))

    def out_of_time():  # what Celery raises inside the task when the soft limit passes
        raise SoftTimeLimitExceeded()

    ctx.kernel_cache = HookedCache(ctx.sessions, out_of_time)
    assert run_job(ctx, job_id, "w1", "t1") == "failed: time limit"
    job = _get(ctx, job_id)
    assert job.status == "failed" and f"time limit of {ctx.settings.job_soft_time_limit} s" in job.error


def test_the_soft_time_limit_is_named_when_it_fires_inside_a_sql_statement(ctx, onnx_models):
    from celery.exceptions import SoftTimeLimitExceeded
    from sqlalchemy import create_engine, text

    job_id = _job(ctx, onnx_models.mlp(seed=47))
    engine = create_engine("sqlite://")

    class OutOfTimeContext(engine.dialect.execution_ctx_cls):
        @classmethod
        def _init_compiled(cls, *args, **kwargs):  # the limit passes while SQLAlchemy prepares a statement
            raise SoftTimeLimitExceeded()

    engine.dialect.execution_ctx_cls = OutOfTimeContext  # this engine only

    def out_of_time_mid_statement():  # SQLAlchemy re-raises it as a StatementError caused by it
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    ctx.kernel_cache = HookedCache(ctx.sessions, out_of_time_mid_statement)
    assert run_job(ctx, job_id, "w1", "t1") == "failed: time limit"
    job = _get(ctx, job_id)
    assert job.status == "failed" and job.error.endswith(f"time limit of {ctx.settings.job_soft_time_limit} s")
    assert job.attempts == 1 and _count(ctx, Artifact) == 0
