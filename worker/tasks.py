"""The `compile`, `profile` and `inference` tasks: late-acknowledged, time-limited, retried with backoff for
transient faults only, and idempotent by job id (see worker/runner.py)."""

from __future__ import annotations

import contextvars
import logging
import threading

from celery import Task
from celery.exceptions import TimeLimitExceeded
from celery.signals import task_postrun, task_prerun, worker_ready, worker_shutdown

from server.core import log_context
from server.core.config import get_settings
from server.db.kernel_cache import mark_stale_kernels
from server.db.session import transaction
from server.jobs import state
from server.jobs.fairness import release_held
from server.jobs.queue import TASKS, JobQueue
from server.jobs.reaper import sweep
from server.jobs.routing import record_worker
from worker.capabilities import announced
from worker.celery_app import COMPILE_TASK, app
from worker.context import worker_context
from worker.runner import run_job
from worker.transient import TRANSIENT_ERRORS, retry_delay

log = logging.getLogger(__name__)


class CompileTask(Task):
    """Fails the job with the reason when the task itself gives up (retries exhausted, or killed
    at the hard time limit)."""

    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        if isinstance(exc, TimeLimitExceeded):  # called in the main process: the child was killed
            limit = worker_context().settings.job_hard_time_limit
            reason = f"compilation exceeded the hard time limit of {limit} s; its process was killed"
        else:
            reason = f"gave up after retrying: {type(exc).__name__}: {exc}"
        try:
            with transaction(worker_context().sessions) as s:
                state.fail_unfinished(s, args[0], task_id, reason)
        except Exception as e:  # the reaper will fail it once its lease runs out
            log.error("could not record the failure of job %s: %s", args[0], e)


# Every job kind's task: late-acknowledged, retried for transient faults only (by `_run`, on
# worker.transient's schedule), failed with the reason when it gives up. All run
# worker.runner.run_job, which does the job's kind's work.
TASK_OPTIONS = {"bind": True, "base": CompileTask, "acks_late": True, "reject_on_worker_lost": True,
                "max_retries": get_settings().transient_retries, "ignore_result": True}


# A job task's log scope (server/core/log_context.py) opens before Celery runs it and closes
# after Celery's own "succeeded in" / failure line, so that line carries the job too.
_log_scopes: dict[str, contextvars.Token] = {}


@task_prerun.connect
def _open_job_log_scope(task_id: str, task: Task, args: tuple = (), **_: object) -> None:
    if task.name in TASKS.values() and args:
        _log_scopes[task_id] = log_context.open_scope(job_id=args[0])


@task_postrun.connect
def _close_job_log_scope(task_id: str, **_: object) -> None:
    token = _log_scopes.pop(task_id, None)
    if token is not None:
        log_context.close_scope(token)


def _run(task: Task, job_id: str) -> str:
    """Run one job of any kind, then send the next held jobs of tenants with room again; every
    line logged meanwhile carries the job's id and (once it is read) its tenant. A transient
    fault retries the task after `retry_delay`."""
    ctx = worker_context()
    try:
        outcome = run_job(ctx, job_id, worker=task.request.hostname or "worker", task_id=task.request.id)
    except TRANSIENT_ERRORS as e:  # retried later; past max_retries, `retry` raises `e` (on_failure)
        raise task.retry(exc=e, countdown=retry_delay(task.request.retries)) from e
    log.info("job %s: %s", job_id, outcome)
    try:  # a dispatch slot came free: send the next held job of a tenant with room
        release_held(ctx.sessions, JobQueue(app, ctx.settings).enqueue, ctx.settings)
    except Exception as e:  # the reaper's sweep releases them later
        log.warning("could not release held jobs: %s", e)
    return outcome


@app.task(name=COMPILE_TASK, **TASK_OPTIONS)
def compile_job(self: Task, job_id: str) -> str:
    """Compile one job's model for its target (does nothing if the job is not queued)."""
    return _run(self, job_id)


@app.task(name=TASKS["profile"], **TASK_OPTIONS)
def profile_job(self: Task, job_id: str) -> str:
    """Profile one job's artifact on this worker (does nothing if the job is not queued)."""
    return _run(self, job_id)


@app.task(name=TASKS["inference"], **TASK_OPTIONS)
def inference_job(self: Task, job_id: str) -> str:
    """Run one job's artifact on its inputs on this worker (does nothing if the job is not queued)."""
    return _run(self, job_id)


_reaper_stop = threading.Event()


@worker_ready.connect
def _start_reaper(sender: object = None, **_: object) -> None:
    """Flag stale kernels, then, every few seconds in the main process, announce this worker
    (the CPU models and CUDA archs it validates), reap expired job leases and apply retention."""
    ctx = worker_context()
    name = str(getattr(sender, "hostname", None) or "worker")
    models, archs = announced(ctx.settings)
    try:
        with transaction(ctx.sessions) as s:
            mark_stale_kernels(s)
    except Exception as e:  # e.g. not migrated yet: reaping must still start
        log.error("could not flag stale kernels (run `tileforge db upgrade`?): %s", e)
    queue = JobQueue(app, ctx.settings)

    def announce() -> None:
        try:
            with transaction(ctx.sessions) as s:
                record_worker(s, name, models, archs)
        except Exception as e:  # jobs still run; they are routed to the kind's queue meanwhile
            log.warning("could not announce worker %s: %s", name, e)

    def loop() -> None:
        announce()
        while not _reaper_stop.wait(ctx.settings.reaper_interval_seconds):
            announce()
            try:
                sweep(ctx.sessions, queue.enqueue, ctx.settings, ctx.storage)
            except Exception as e:  # keep reaping; the database may come back
                log.warning("reaper pass failed: %s", e)

    threading.Thread(target=loop, daemon=True, name="tileforge-reaper").start()


@worker_shutdown.connect
def _stop_reaper(**_: object) -> None:
    _reaper_stop.set()
