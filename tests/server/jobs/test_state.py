"""Job ownership: claims, fenced writes, the reaper, cancellation."""

from datetime import timedelta

import pytest

from server.db.models import Job, JobStatus, Model, Tenant
from server.db.session import transaction
from server.db.types import utcnow
from server.jobs import state
from server.jobs.reaper import reap_expired_jobs
from server.storage import Blob


@pytest.fixture
def job_id(db_sessions) -> str:
    with transaction(db_sessions) as s:
        tenant = Tenant(name="t")
        s.add(tenant)
        s.flush()
        model = Model(tenant_id=tenant.id, sha256="0" * 64, size=1, inputs=[], outputs=[],
                      op_histogram={}, parameters=0, opset=17)
        s.add(model)
        s.flush()
        job = Job(tenant_id=tenant.id, model_id=model.id, target="cpu", target_kind="cpu", task_id="t0")
        s.add(job)
        s.flush()
        return job.id


def _claim(sessions, job_id, worker="w1", lease=30.0):
    with transaction(sessions) as s:
        return state.claim(s, job_id, worker, f"task-{worker}", lease)


def _job(sessions, job_id) -> Job:
    with sessions() as s:
        return s.get(Job, job_id)


def _expire(sessions, job_id):
    with transaction(sessions) as s:
        s.get(Job, job_id).lease_expires_at = utcnow() - timedelta(seconds=1)


def test_a_job_is_claimed_once(db_sessions, job_id):
    assert _claim(db_sessions, job_id, "w1") == 1
    assert _claim(db_sessions, job_id, "w2") is None  # live lease: someone else has it
    job = _job(db_sessions, job_id)
    assert (job.status, job.worker, job.task_id) == ("running", "w1", "task-w1")


def test_a_finished_job_is_never_run_again(db_sessions, job_id):
    attempt = _claim(db_sessions, job_id)
    with transaction(db_sessions) as s:
        state.succeed(s, job_id, attempt, _job(db_sessions, job_id).tenant_id, Blob("a" * 64, 3), {"k": 1})
    assert _claim(db_sessions, job_id, "w2") is None
    assert _job(db_sessions, job_id).status == "succeeded"


def test_an_expired_lease_fences_out_the_old_worker(db_sessions, job_id):
    first = _claim(db_sessions, job_id, "w1")
    _expire(db_sessions, job_id)
    second = _claim(db_sessions, job_id, "w2")
    assert second == first + 1
    with transaction(db_sessions) as s, pytest.raises(state.LeaseLost):
        state.renew(s, job_id, first, 30.0, stage="build")
    with transaction(db_sessions) as s, pytest.raises(state.LeaseLost):
        state.finish(s, job_id, first, JobStatus.failed, error="zombie")
    assert _job(db_sessions, job_id).worker == "w2"


def test_reaper_requeues_then_gives_up_with_the_reason(db_sessions, job_id):
    sent = []
    for attempt in (1, 2):
        assert _claim(db_sessions, job_id, f"w{attempt}") == attempt
        _expire(db_sessions, job_id)
        assert reap_expired_jobs(db_sessions, lambda *a: sent.append(a), max_attempts=3) == 1
        job = _job(db_sessions, job_id)
        assert job.status == "queued" and "stopped responding" in job.error
    assert [a[:2] for a in sent] == [(job_id, "cpu")] * 2 and sent[0][2] != sent[1][2]
    _claim(db_sessions, job_id, "w3")
    _expire(db_sessions, job_id)
    reap_expired_jobs(db_sessions, lambda *a: sent.append(a), max_attempts=3)
    job = _job(db_sessions, job_id)
    assert job.status == "failed" and "attempt 3 of 3" in job.error and len(sent) == 2
    assert reap_expired_jobs(db_sessions, lambda *a: None, max_attempts=3) == 0


def test_reaper_leaves_live_leases_alone(db_sessions, job_id):
    _claim(db_sessions, job_id)
    assert reap_expired_jobs(db_sessions, lambda *a: None, max_attempts=3) == 0
    assert _job(db_sessions, job_id).status == "running"


def test_cancel_queued_at_once_running_at_next_stage(db_sessions, job_id):
    with transaction(db_sessions) as s:
        assert state.request_cancel(s, s.get(Job, job_id))
    assert _job(db_sessions, job_id).status == "cancelled"
    assert _claim(db_sessions, job_id) is None
    with transaction(db_sessions) as s:
        assert not state.request_cancel(s, s.get(Job, job_id))


def test_cancel_of_running_job_is_seen_on_renewal(db_sessions, job_id):
    attempt = _claim(db_sessions, job_id)
    with transaction(db_sessions) as s:
        assert state.request_cancel(s, s.get(Job, job_id))
    with transaction(db_sessions) as s:
        assert state.renew(s, job_id, attempt, 30.0, stage="build") is True
    _expire(db_sessions, job_id)
    reap_expired_jobs(db_sessions, lambda *a: pytest.fail("a cancelled job is not re-queued"), 3)
    assert _job(db_sessions, job_id).status == "cancelled"


def _published(sessions, job_id, ago: float) -> None:
    with transaction(sessions) as s:
        s.get(Job, job_id).published_at = utcnow() - timedelta(seconds=ago)


def test_a_queued_job_whose_message_may_be_lost_is_published_again_once(db_sessions, job_id):
    from server.jobs.reaper import republish_lost_jobs

    sent = []
    enqueue = lambda job, key, task, kind: sent.append((job, key, task, kind))  # noqa: E731
    _published(db_sessions, job_id, ago=5)
    assert republish_lost_jobs(db_sessions, enqueue, lost_after_seconds=60) == 0  # not long enough
    _published(db_sessions, job_id, ago=120)
    assert republish_lost_jobs(db_sessions, enqueue, lost_after_seconds=60) == 1
    job = _job(db_sessions, job_id)
    assert sent == [(job_id, "cpu", job.task_id, "compile")] and job.task_id != "t0"
    assert job.status == JobStatus.queued and utcnow() - job.published_at < timedelta(seconds=30)
    assert republish_lost_jobs(db_sessions, enqueue, lost_after_seconds=60) == 0  # just published
    # the first message was not lost after all: whichever arrives first claims, the other finds nothing
    assert _claim(db_sessions, job_id, "w1") == 1 and _claim(db_sessions, job_id, "w2") is None


def test_running_cancelled_or_finished_jobs_are_not_published_again(db_sessions, job_id):
    from server.jobs.reaper import republish_lost_jobs

    sent = []
    _claim(db_sessions, job_id)
    _published(db_sessions, job_id, ago=3600)
    assert republish_lost_jobs(db_sessions, lambda *a: sent.append(a), lost_after_seconds=60) == 0
    assert sent == []


def test_a_profile_job_whose_worker_died_is_requeued_as_a_profile_job(db_sessions, job_id):
    with transaction(db_sessions) as s:
        s.get(Job, job_id).kind = "profile"
    _claim(db_sessions, job_id)
    _expire(db_sessions, job_id)
    sent = []
    assert reap_expired_jobs(db_sessions, lambda *a: sent.append(a), max_attempts=3) == 1
    assert sent == [(job_id, "cpu", _job(db_sessions, job_id).task_id, "profile")]
