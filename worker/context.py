"""What a worker process needs, built once per process (prefork children must not share
database connections with their parent)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from server.core.config import Settings, get_settings
from server.db.kernel_namespace import kernel_namespace
from server.db.session import make_sessionmaker, settings_engine
from server.storage import LocalStorage, Storage
from worker.kernel_cache import DatabaseKernelCache


@dataclass
class WorkerContext:
    settings: Settings
    sessions: sessionmaker[Session]
    storage: Storage
    kernel_cache: DatabaseKernelCache

    def kernel_cache_of(self, tenant_id: str) -> DatabaseKernelCache:
        """The kernel cache a tenant's jobs use: its private namespace where it keeps one."""
        with self.sessions() as s:
            return self.kernel_cache.in_namespace(kernel_namespace(s, tenant_id))


_context: WorkerContext | None = None


def worker_context() -> WorkerContext:
    """This process's context, built on first use (a forked child builds its own)."""
    global _context
    if _context is None:
        settings = get_settings()
        sessions = make_sessionmaker(settings_engine(settings))
        _context = WorkerContext(settings, sessions, LocalStorage(settings.storage_root),
                                 DatabaseKernelCache(sessions))
    return _context


def _forget_parent_connections() -> None:
    """In a forked child: drop the parent's pooled connections without closing them (they are the parent's)."""
    global _context
    if _context is not None:
        engine: Engine = _context.sessions.kw["bind"]
        engine.dispose(close=False)
        _context = None


os.register_at_fork(after_in_child=_forget_parent_connections)
