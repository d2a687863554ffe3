"""What this worker's host can run: the named CPU models whose code it executes, and so
the queues it takes jobs from beyond its target kinds' (server/jobs/routing.py)."""

from __future__ import annotations

import functools

from compiler.target import get_target
from compiler.target.cpu import host_cannot_run
from compiler.target.cpu_models import CPU_MODELS
from server.core.config import Settings
from server.jobs.routing import model_queue_key


@functools.cache
def runnable_cpu_models() -> tuple[str, ...]:
    """The named CPU models this host runs (and so validates)."""
    return tuple(m for m in CPU_MODELS if not host_cannot_run(get_target(f"cpu:{m}")))


def announced_cpu_models(settings: Settings) -> list[str]:
    """The models a worker with `settings` validates: those its host runs, if it takes CPU jobs."""
    return list(runnable_cpu_models()) if settings.queue_for("cpu") in settings.consumed_queues() else []


def worker_queues(settings: Settings) -> list[str]:
    """Every queue a worker with `settings` consumes: its target kinds', and those of the
    CPU models it validates."""
    return settings.consumed_queues() + [settings.queue_for(model_queue_key(m))
                                         for m in announced_cpu_models(settings)]
