"""What a worker process needs, built once per process (prefork children must not share
database connections with their parent)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from server.core.config import Settings, get_settings
from server.db.kernel_cache import DatabaseKernelCache
from server.db.session import make_engine, make_sessionmaker
from server.storage import LocalStorage, Storage


@dataclass
class WorkerContext:
    settings: Settings
    sessions: sessionmaker[Session]
    storage: Storage
    kernel_cache: DatabaseKernelCache


_contexts: dict[int, WorkerContext] = {}


def worker_context() -> WorkerContext:
    """This process's context (a forked child builds its own)."""
    pid = os.getpid()
    if pid not in _contexts:
        settings = get_settings()
        sessions = make_sessionmaker(make_engine(settings.db_url))
        _contexts[pid] = WorkerContext(settings, sessions, LocalStorage(settings.storage_root),
                                       DatabaseKernelCache(sessions))
    return _contexts[pid]
