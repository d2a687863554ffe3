"""The worker's Celery app: `create_celery` (server/jobs/queue.py, the same configuration
the API sends with) with the tasks of worker/tasks.py registered.

`python -m worker` (what `tileforge worker` runs) starts a worker on this host's queues.
"""

from __future__ import annotations

from celery.signals import setup_logging

from server.core.config import get_settings
from server.core.logging_setup import configure_logging
from server.jobs.queue import COMPILE_TASK, create_celery

__all__ = ["COMPILE_TASK", "app"]

app = create_celery(get_settings(), include_tasks=True)


@setup_logging.connect
def _configure_logging(loglevel: int | str | None = None, **_: object) -> None:
    """The service's log format (TILEFORGE_LOG_FORMAT) in place of Celery's own: a receiver of
    this signal tells Celery to leave logging to it."""
    configure_logging(get_settings().log_format, loglevel or "INFO")
