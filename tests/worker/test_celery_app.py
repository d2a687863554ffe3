"""The Celery configuration the issue asks for: late acks, limits, retries, queues per kind."""

from kombu import Queue

from server.core.config import Settings
from server.jobs.queue import COMPILE_TASK, create_celery
from worker.transient import TRANSIENT_ERRORS


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


def test_compile_task_retries_only_transient_faults():
    from compiler.errors import ModelError
    from worker.tasks import compile_job

    assert compile_job.name == COMPILE_TASK and compile_job.acks_late and compile_job.reject_on_worker_lost
    assert set(compile_job.autoretry_for) == set(TRANSIENT_ERRORS) and compile_job.retry_backoff
    assert not any(issubclass(ModelError, t) for t in compile_job.autoretry_for)


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
