"""The API's side of the job queue: the Celery app a web process sends with (broker, result
backend and one queue per target kind or named CPU model, all from the settings), and
`JobQueue`, which puts a job's task on its queue by the task's name. The worker builds its
app with the same `create_celery` and registers the task under that name
(worker/tasks.py); nothing here imports the worker or the compiler's heavy stages.
"""

from __future__ import annotations

import logging

from celery import Celery
from kombu import Exchange, Queue

from compiler.target.cpu_models import CPU_MODELS
from compiler.target.cuda import SPECS
from server.core.config import TARGET_KINDS, Settings
from server.jobs.embedded_transport import embedded_transport, engine_url
from server.jobs.routing import arch_queue_key, model_queue_key

COMPILE_TASK = "tileforge.compile"
# The task of each job kind (server/db/models.py JobKind); the worker registers each name.
TASKS = {"compile": COMPILE_TASK, "profile": "tileforge.profile", "inference": "tileforge.inference"}


def create_celery(settings: Settings, include_tasks: bool = False) -> Celery:
    """A Celery app configured from `settings`."""
    app = Celery("tileforge", broker=settings.broker_url, backend=settings.result_backend,
                 include=["worker.tasks"] if include_tasks else [])
    transport_options: dict = {}
    if settings.is_embedded_broker:
        # Our subclass of kombu's transport, for its polling interval (embedded_transport.py).
        # The read and write URLs, because Celery prefers CELERY_BROKER_URL from the
        # environment (where to_env puts the `sqla+` URL) over a configured broker_url.
        url = engine_url(settings.broker_url)
        app.conf.update(broker_read_url=url, broker_write_url=url,
                        broker_transport=embedded_transport(settings.broker_polling_seconds))
        # kombu hands these to create_engine: wait on SQLite's lock rather than fail
        transport_options["connect_args"] = {"timeout": 30}
    else:
        # An unacknowledged message (its worker died) comes back after this long; the
        # job's own lease and the reaper usually recover it sooner.
        transport_options["visibility_timeout"] = settings.job_hard_time_limit + 4 * settings.job_lease_seconds
    app.conf.update(
        task_queues=[_queue(settings.queue_for(key)) for key in queue_keys()],
        task_default_queue=settings.queue_for("cpu"),
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_soft_time_limit=settings.job_soft_time_limit,
        task_time_limit=settings.job_hard_time_limit,
        worker_prefetch_multiplier=1,
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        result_expires=24 * 3600,
        task_serializer="json",
        accept_content=["json"],
        worker_hijack_root_logger=False,
        # A database-table broker has no fan-out: no remote control, events or gossip.
        worker_enable_remote_control=not settings.is_embedded_broker,
    )
    return app


def queue_keys() -> list[str]:
    """Every queue key: the target kinds', each named CPU model's and each CUDA arch's."""
    archs = sorted({spec.arch for spec in SPECS})
    return [*TARGET_KINDS, *map(model_queue_key, CPU_MODELS), *map(arch_queue_key, archs)]


def _queue(name: str) -> Queue:
    """A queue with its own direct exchange, so a message sent to it lands only there."""
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


log = logging.getLogger(__name__)


class JobQueue:
    """Puts a job on a queue; revokes best-effort (the job row is the truth)."""

    def __init__(self, celery: Celery, settings: Settings) -> None:
        self.celery = celery
        self.settings = settings

    def enqueue(self, job_id: str, queue_key: str, task_id: str, kind: str = "compile") -> None:
        """Send the task of job `kind` for `job_id` to queue `queue_key` (a target kind, or a
        named CPU model's key: see server/jobs/routing.py)."""
        self.celery.send_task(TASKS[kind], args=[job_id], task_id=task_id,
                              queue=self.settings.queue_for(queue_key))

    def revoke(self, task_id: str) -> None:
        """Ask workers to drop a task; a no-op on a broker without fan-out."""
        if self.settings.is_embedded_broker:
            return  # the worker sees the cancelled row and does nothing
        try:
            self.celery.control.revoke(task_id)
        except Exception as e:  # cancellation already holds in the database
            log.warning("could not revoke task %s: %s", task_id, e)
