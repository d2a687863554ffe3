"""Sending compile jobs to workers and taking them back."""

from __future__ import annotations

import logging

from celery import Celery

from server.core.config import Settings
from worker.celery_app import COMPILE_TASK

log = logging.getLogger(__name__)


class JobQueue:
    """Puts a job on a queue; revokes best-effort (the job row is the truth)."""

    def __init__(self, celery: Celery, settings: Settings) -> None:
        self.celery = celery
        self.settings = settings

    def enqueue(self, job_id: str, queue_key: str, task_id: str) -> None:
        """Send the compile task for `job_id` to queue `queue_key` (a target kind, or a
        named CPU model's key: see server/jobs/routing.py)."""
        self.celery.send_task(COMPILE_TASK, args=[job_id], task_id=task_id,
                              queue=self.settings.queue_for(queue_key))

    def revoke(self, task_id: str) -> None:
        """Ask workers to drop a task; a no-op on a broker without fan-out."""
        if self.settings.is_embedded_broker:
            return  # the worker sees the cancelled row and does nothing
        try:
            self.celery.control.revoke(task_id)
        except Exception as e:  # cancellation already holds in the database
            log.warning("could not revoke task %s: %s", task_id, e)
