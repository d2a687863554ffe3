"""The kernel cache in the database: compiler.cache.KernelCache on the `kernels` table, as
the worker's compilations read and fill it (the web process only shows the table)."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
from server.db.kernel_namespace import namespaced_key
from server.db.models import Kernel
from server.db.session import transaction
from server.db.types import utcnow

_SIGNATURE_PARTS = ("op_pattern", "shapes", "dtypes", "te_hash", "target_fingerprint",
                    "compiler_fingerprint", "options")


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

    def get(self, key: str) -> KernelEntry | None:
        """The entry for `key`, counting the hit; None on a miss."""
        key = namespaced_key(self.namespace, key)
        with transaction(self._sessions) as s:
            row = s.get(Kernel, key)
            if row is None or row.stale:
                return None
            s.execute(update(Kernel).where(Kernel.key == key)
                      .values(hit_count=Kernel.hit_count + 1, last_used_at=utcnow()))
            return entry_of(row)

    def put(self, entry: KernelEntry) -> None:
        """Store `entry` unless its key is already there (the first writer wins)."""
        sig = entry.signature
        values = {part: getattr(sig, part) for part in _SIGNATURE_PARTS} | {
            "key": namespaced_key(self.namespace, entry.key),
            "namespace": self.namespace,
            "tile_config": entry.tile_config,
            "te_json": entry.te_json,
            "source": entry.source,
            "binary": entry.binary,
            "estimated_us": entry.estimated_us,
            "measured_us": entry.measured_us,
            "validation_error": entry.validation_error,
            "extras": entry.extras,
            "hit_count": 0,
            "created_at": utcnow(),
            "last_used_at": utcnow(),
            "stale": sig.compiler_fingerprint != compiler_fingerprint(),
        }
        with transaction(self._sessions) as s:
            dialect = postgresql if s.bind.dialect.name == "postgresql" else sqlite
            s.execute(dialect.insert(Kernel).values(**values).on_conflict_do_nothing(index_elements=["key"]))


def entry_of(row: Kernel) -> KernelEntry:
    """The compiler's view of a kernel row."""
    return KernelEntry(
        signature=KernelSignature(**{part: getattr(row, part) for part in _SIGNATURE_PARTS}),
        tile_config=row.tile_config,
        source=row.source,
        binary=row.binary,
        te_json=row.te_json,
        estimated_us=row.estimated_us,
        measured_us=row.measured_us,
        validation_error=row.validation_error,
        extras=row.extras or {},
    )
