"""Which queue a job goes to: the queue of the code it runs (a named CPU model's, a CUDA
arch's) while a live worker's host runs that code, so the job is validated there; else its
target kind's queue, where any worker of that kind compiles it and one that cannot run it
says so (the job then reports `validated: false` with the reason)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from compiler.target import get_target
from compiler.target.cpu_models import model_of_target
from server.db.models import WorkerHost
from server.db.types import utcnow

Enqueue = Callable[[str, str, str, str], None]  # (job_id, queue key, task_id, job kind)


def cpu_model_of(target: str) -> str | None:
    """The CPU model a target name asks for (`cpu:x86-64-v3` -> `x86-64-v3`), else None."""
    model = model_of_target(target)
    return model.name if model else None


def model_queue_key(model: str) -> str:
    """The queue key (the part after the prefix) of the jobs of one named CPU model."""
    return f"cpu.{model}"


def arch_queue_key(arch: str) -> str:
    """The queue key of the jobs of one CUDA arch (`sm_90`)."""
    return f"cuda.{arch}"


def queue_key(session: Session, target: str, kind: str, fresh_seconds: float) -> str:
    """The queue key for a job of `target` (of `kind`): the queue of its CPU model or CUDA
    arch if a worker seen in the last `fresh_seconds` runs it, else `kind`."""
    since = utcnow() - timedelta(seconds=fresh_seconds)
    fresh = select(WorkerHost).where(WorkerHost.last_seen >= since)
    if kind == "cuda":
        arch = get_target(target).arch
        if any(arch in (w.cuda_archs or []) for w in session.scalars(fresh)):
            return arch_queue_key(arch)
        return kind
    model = cpu_model_of(target) if kind == "cpu" else None
    if model is not None and any(model in (w.cpu_models or []) for w in session.scalars(fresh)):
        return model_queue_key(model)
    return kind


def record_worker(session: Session, name: str, cpu_models: list[str], cuda_archs: list[str] = (),
                  now: datetime | None = None) -> None:
    """Say that worker `name` is alive and which named CPU models and CUDA archs its host runs."""
    session.merge(WorkerHost(name=name, cpu_models=sorted(cpu_models), cuda_archs=sorted(cuda_archs),
                             last_seen=now or utcnow()))


def publish(sessions: sessionmaker[Session], enqueue: Enqueue, job_id: str, target: str, kind: str,
            job_kind: str, task_id: str, fresh_seconds: float) -> None:
    """Send the task of the job's kind (compile, profile, inference), routed as a new job's
    would be (`queue_key`)."""
    with sessions() as s:
        key = queue_key(s, target, kind, fresh_seconds)
    enqueue(job_id, key, task_id, job_kind)
