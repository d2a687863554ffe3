"""The worker's Celery app: `create_celery` (server/jobs/queue.py, the same configuration
the API sends with) with the tasks of worker/tasks.py registered.

`python -m worker` (what `tileforge worker` runs) starts a worker on this host's queues.
"""

from __future__ import annotations

from server.core.config import get_settings
from server.jobs.queue import COMPILE_TASK, create_celery

__all__ = ["COMPILE_TASK", "app"]

app = create_celery(get_settings(), include_tasks=True)
