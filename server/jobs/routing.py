"""Which queue a job goes to: a named CPU model's own queue while a live worker's host runs
that model (so the job is validated there), else its target kind's queue, where any worker
compiles it and one that cannot run it says so in the report."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from compiler.target.cpu_models import model_of_target
from server.db.models import WorkerHost
from server.db.types import utcnow

Enqueue = Callable[[str, str, str], None]  # (job_id, queue key, task_id)


def cpu_model_of(target: str) -> str | None:
    """The CPU model a target name asks for (`cpu:x86-64-v3` -> `x86-64-v3`), else None."""
    model = model_of_target(target)
    return model.name if model else None


def model_queue_key(model: str) -> str:
    """The queue key (the part after the prefix) of the jobs of one named CPU model."""
    return f"cpu.{model}"


def queue_key(session: Session, target: str, kind: str, fresh_seconds: float) -> str:
    """The queue key for a job of `target` (of `kind`): its CPU model's queue if a worker
    seen in the last `fresh_seconds` runs that model, else `kind`."""
    model = cpu_model_of(target) if kind == "cpu" else None
    if model is None:
        return kind
    since = utcnow() - timedelta(seconds=fresh_seconds)
    for models in session.scalars(select(WorkerHost.cpu_models).where(WorkerHost.last_seen >= since)):
        if model in (models or []):
            return model_queue_key(model)
    return kind


def record_worker(session: Session, name: str, cpu_models: list[str], now: datetime | None = None) -> None:
    """Say that worker `name` is alive and which named CPU models its host runs."""
    session.merge(WorkerHost(name=name, cpu_models=sorted(cpu_models), last_seen=now or utcnow()))


def publish(sessions: sessionmaker[Session], enqueue: Enqueue, job_id: str, target: str, kind: str,
             task_id: str, fresh_seconds: float) -> None:
    """Send the job's task, routed as a new job's would be (`routing.queue_key`)."""
    with sessions() as s:
        key = queue_key(s, target, kind, fresh_seconds)
    enqueue(job_id, key, task_id)
