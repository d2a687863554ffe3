"""The Celery configuration the issue asks for: late acks, limits, retries, queues per kind."""

import random
from types import SimpleNamespace

import pytest
from kombu import Queue
from sqlalchemy.exc import OperationalError

from server.core.config import Settings
from server.jobs.queue import COMPILE_TASK, create_celery
from worker.transient import FIRST_DELAY_SECONDS, LONGEST_DELAY_SECONDS, retry_delay


def test_reliability_settings(tmp_path):
    settings = Settings(home=tmp_path, job_soft_time_limit=100, job_hard_time_limit=120)
    conf = create_celery(settings).conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert (conf.task_soft_time_limit, conf.task_time_limit) == (100, 120)
    assert conf.worker_prefetch_multiplier == 1


def test_each_target_kind_cpu_model_and_cuda_arch_has_its_own_queue_and_exchange(tmp_path):
    from compiler.target.cpu_models import CPU_MODELS
    from compiler.target.cuda import SPECS

    queues: list[Queue] = create_celery(Settings(home=tmp_path, queue_prefix="p")).conf.task_queues
    archs = sorted({spec.arch for spec in SPECS})
    names = ["p.cpu", "p.cuda", *(f"p.cpu.{m}" for m in CPU_MODELS), *(f"p.cuda.{a}" for a in archs)]
    assert [(q.name, q.exchange.name, q.routing_key) for q in queues] == [(n, n, n) for n in names]


def test_a_cpu_worker_takes_the_queues_of_the_models_its_host_runs(tmp_path):
    import platform

    from worker.capabilities import runnable_cpu_models, runnable_cuda_archs, worker_queues

    if platform.machine() == "x86_64":
        assert "x86-64-v2" in runnable_cpu_models()  # every x86-64 host of this decade
    models = [f"p.cpu.{m}" for m in runnable_cpu_models()]
    archs = [f"p.cuda.{a}" for a in runnable_cuda_archs()]
    cpu = worker_queues(Settings(home=tmp_path, queue_prefix="p", worker_queues="cpu"))
    assert cpu == ["p.cpu", *models]
    assert worker_queues(Settings(home=tmp_path, queue_prefix="p", worker_queues="cuda")) == ["p.cuda", *archs]
    auto = worker_queues(Settings(home=tmp_path, queue_prefix="p"))
    assert auto == (["p.cpu", "p.cuda", *models, *archs] if archs else ["p.cpu", *models])


def test_the_gpu_probe_in_a_child_process_says_what_this_process_finds():
    from compiler.runtime.cuda import gpu_runs
    from compiler.target.cuda import SPECS
    from worker.capabilities import runnable_cuda_archs

    # The worker asks a child (CUDA must not be initialized in the parent it forks from);
    # here the test process asks the GPU itself: none on a host without one.
    assert set(runnable_cuda_archs()) == {s.arch for s in SPECS if gpu_runs(s.arch)}


def test_compile_task_is_late_acknowledged_and_retried_a_configured_number_of_times():
    from worker.tasks import compile_job

    assert compile_job.name == COMPILE_TASK and compile_job.acks_late and compile_job.reject_on_worker_lost
    assert compile_job.max_retries == Settings().transient_retries


class _Retried(Exception):
    def __init__(self, exc: BaseException, countdown: float) -> None:
        self.exc, self.countdown = exc, countdown


def _task(retries: int) -> SimpleNamespace:
    def retry(exc: BaseException, countdown: float) -> _Retried:
        return _Retried(exc, countdown)
    return SimpleNamespace(request=SimpleNamespace(retries=retries, hostname="w", id="t"), retry=retry)


@pytest.mark.parametrize("fault", [OperationalError("UPDATE jobs", {}, ConnectionError("shutting down")),
                                   ConnectionError("redis went away")])
def test_a_transient_fault_retries_the_task_after_the_schedules_delay(monkeypatch, fault):
    import worker.tasks as tasks

    def run_job(*_, **__):
        raise fault
    monkeypatch.setattr(tasks, "worker_context", lambda: SimpleNamespace(sessions=None, settings=None))
    monkeypatch.setattr(tasks, "run_job", run_job)
    with pytest.raises(_Retried) as retried:
        tasks._run(_task(retries=2), "job")
    assert retried.value.exc is fault and 4.0 <= retried.value.countdown <= 8.0


def test_any_other_fault_is_not_retried(monkeypatch):
    import worker.tasks as tasks

    def run_job(*_, **__):
        raise KeyError("ours")
    monkeypatch.setattr(tasks, "worker_context", lambda: SimpleNamespace(sessions=None, settings=None))
    monkeypatch.setattr(tasks, "run_job", run_job)
    with pytest.raises(KeyError):
        tasks._run(_task(retries=0), "job")


def test_retry_delays_wait_their_first_half_so_retries_outlive_an_outage():
    rng = random.Random(7)
    for n in range(8):
        full = min(LONGEST_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2**n)
        delays = [retry_delay(n, rng) for _ in range(200)]
        assert full / 2 <= min(delays) and max(delays) <= full
        assert max(delays) - min(delays) > full / 4  # still spread: tasks failing together retry apart
    # With the default count, a task outlives a 30 s database outage whatever the draws.
    assert sum(min(LONGEST_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2**n) / 2
               for n in range(Settings().transient_retries)) >= 30


def test_the_embedded_broker_is_polled_at_the_configured_interval(tmp_path, monkeypatch):
    from kombu.transport.sqlalchemy import Transport

    settings = Settings(home=tmp_path, broker_polling_seconds=0.07)
    # A worker inherits CELERY_BROKER_URL (Settings.to_env), which Celery prefers to broker_url.
    monkeypatch.setenv("CELERY_BROKER_URL", settings.broker_url)
    app = create_celery(settings)
    for connection in (app.connection_for_read(), app.connection_for_write()):
        with connection:
            assert isinstance(connection.transport, Transport)
            assert connection.transport.polling_interval == 0.07
            with connection.SimpleQueue("probe") as queue:  # the engine accepts the options too
                queue.put({"n": 1})
                assert queue.get(timeout=5).payload == {"n": 1}
