"""The per-tenant dispatch window: past it, a tenant's jobs are held in the database and
sent, oldest first, as its jobs end; other tenants' jobs go straight to the broker."""

from dataclasses import dataclass, field

from sqlalchemy import select, update

from server.core.config import Settings
from server.db.models import Job, JobStatus, Model, Tenant
from server.db.session import transaction
from server.jobs.fairness import release_held
from server.jobs.reaper import republish_lost_jobs
from server.services.compilations import create_compilation


@dataclass
class RecordingQueue:
    """A JobQueue that records what it sends."""

    settings: Settings
    sent: list[str] = field(default_factory=list)

    def enqueue(self, job_id: str, queue_key: str, task_id: str, kind: str = "compile") -> None:
        self.sent.append(job_id)


def _tenant_with_model(s, name: str) -> tuple[Tenant, Model]:
    tenant = Tenant(name=name)
    s.add(tenant)
    s.flush()
    model = Model(tenant_id=tenant.id, sha256=name.ljust(64, "0"), size=1, inputs=[], outputs=[],
                  op_histogram={}, parameters=0, opset=17)
    s.add(model)
    s.commit()
    return tenant, model


def test_a_tenant_past_its_window_waits_its_turn_and_others_do_not(db_sessions, tmp_path):
    queue = RecordingQueue(Settings(home=tmp_path, tenant_dispatch_window=2))
    with db_sessions() as s:
        a, a_model = _tenant_with_model(s, "a")
        b, b_model = _tenant_with_model(s, "b")
        a_jobs = [create_compilation(s, queue, a, a_model.id, "cpu", {}).id for _ in range(5)]
        b_job = create_compilation(s, queue, b, b_model.id, "cpu", {}).id
        held = set(s.scalars(select(Job.id).where(Job.held.is_(True))))
    assert queue.sent == [*a_jobs[:2], b_job]  # b's one job goes right behind a's window
    assert held == set(a_jobs[2:])

    assert release_held(db_sessions, queue.enqueue, queue.settings) == 0  # a's window is full
    assert republish_lost_jobs(db_sessions, queue.enqueue, lost_after_seconds=-1) == 3  # held ones are not "lost"
    queue.sent.clear()
    with transaction(db_sessions) as s:
        s.execute(update(Job).where(Job.id == a_jobs[0]).values(status=JobStatus.succeeded))
        s.execute(update(Job).where(Job.id == a_jobs[2]).values(status=JobStatus.cancelled))
    assert release_held(db_sessions, queue.enqueue, queue.settings) == 1
    assert queue.sent == [a_jobs[3]]  # the oldest held job still queued; the cancelled one stays put
    assert release_held(db_sessions, queue.enqueue, queue.settings) == 0  # fenced: sent once


def test_the_window_is_per_target_kind(db_sessions, tmp_path):
    queue = RecordingQueue(Settings(home=tmp_path, tenant_dispatch_window=1))
    with db_sessions() as s:
        tenant, model = _tenant_with_model(s, "gpu-user")
        cuda = [create_compilation(s, queue, tenant, model.id, "cuda:a100", {}).id for _ in range(2)]
        cpu = create_compilation(s, queue, tenant, model.id, "cpu", {}).id
    # CUDA jobs waiting for a GPU worker do not hold back the tenant's CPU job
    assert queue.sent == [cuda[0], cpu]
