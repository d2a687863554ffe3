"""The Celery app: broker and result backend from the settings, one queue per target kind.

`celery -A worker.celery_app worker` (or `tileforge worker`) runs the tasks in
worker/tasks.py; the API builds its own app with `create_celery` and sends tasks by
name, so it never imports the compiler's heavy stages.
"""

from __future__ import annotations

from celery import Celery
from kombu import Exchange, Queue

from compiler.target.cpu_models import CPU_MODELS
from server.core.config import TARGET_KINDS, Settings, get_settings
from server.jobs.routing import model_queue_key

COMPILE_TASK = "tileforge.compile"


def create_celery(settings: Settings, include_tasks: bool = False) -> Celery:
    """A Celery app configured from `settings`."""
    app = Celery("tileforge", broker=settings.broker_url, backend=settings.result_backend,
                 include=["worker.tasks"] if include_tasks else [])
    transport_options: dict = {}
    if settings.is_embedded_broker:
        # kombu hands these to create_engine: wait on SQLite's lock rather than fail
        transport_options["connect_args"] = {"timeout": 30}
    else:
        # An unacknowledged message (its worker died) comes back after this long; the
        # job's own lease and the reaper usually recover it sooner.
        transport_options["visibility_timeout"] = settings.job_hard_time_limit + 4 * settings.job_lease_seconds
    app.conf.update(
        task_queues=[_queue(settings.queue_for(key)) for key in
                     (*TARGET_KINDS, *(model_queue_key(m) for m in CPU_MODELS))],
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


def _queue(name: str) -> Queue:
    """A queue with its own direct exchange, so a message sent to it lands only there."""
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


app = create_celery(get_settings(), include_tasks=True)
