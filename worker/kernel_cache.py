"""The kernel cache in the database: compiler.cache.KernelCache on the `kernels` table, as
the worker's compilations read and fill it (the web process only shows the table)."""

from __future__ import annotations

import logging

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from compiler.cache import KernelEntry, KernelSignature, exact_hit
from server.db.kernel_cache import entry_of, insert_kernel
from server.db.kernel_namespace import namespaced_key
from server.db.models import Kernel
from server.db.session import transaction
from server.db.types import utcnow

log = logging.getLogger(__name__)


class DatabaseKernelCache:
    """Kernels shared by every worker; `put` is insert-or-ignore on the key, so racing
    workers store each kernel once. With a `namespace` (a tenant's id) it reads and writes
    that tenant's private namespace alone (server/db/kernel_namespace.py)."""

    def __init__(self, sessions: sessionmaker[Session], namespace: str | None = None) -> None:
        self._sessions = sessions
        self.namespace = namespace

    def in_namespace(self, namespace: str | None) -> DatabaseKernelCache:
        """The same cache, on `namespace` (None: the shared one)."""
        return self if namespace == self.namespace else DatabaseKernelCache(self._sessions, namespace)

    def get(self, signature: KernelSignature) -> KernelEntry | None:
        """The entry built for exactly `signature`, counting the hit; None on a miss (a row under
        the same key whose stored signature differs is a hash collision, not a hit)."""
        key = namespaced_key(self.namespace, signature.key)
        with transaction(self._sessions) as s:
            row = s.get(Kernel, key)
            if row is None or row.stale:
                return None
            hit = exact_hit(entry_of(row), signature)
            if hit is None:
                log.warning("kernel key %s collides: its stored signature is another kernel's", key)
                return None
            s.execute(update(Kernel).where(Kernel.key == key)
                      .values(hit_count=Kernel.hit_count + 1, last_used_at=utcnow()))
            return hit

    def put(self, entry: KernelEntry) -> None:
        """Store `entry` unless its key is already there (the first writer wins)."""
        with transaction(self._sessions) as s:
            insert_kernel(s, entry, self.namespace)
