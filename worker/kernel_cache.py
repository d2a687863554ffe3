"""The kernel cache in the database: compiler.cache.KernelCache on the `kernels` table, as
the worker's compilations read and fill it (the web process only shows the table)."""

from __future__ import annotations

import logging

from sqlalchemy import update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint, exact_hit
from server.db.models import Kernel
from server.db.session import transaction
from server.db.types import utcnow

log = logging.getLogger(__name__)

_SIGNATURE_PARTS = ("op_pattern", "shapes", "dtypes", "te_hash", "target_fingerprint",
                    "compiler_fingerprint", "options")


class DatabaseKernelCache:
    """Kernels shared by every worker; `put` is insert-or-ignore on the key, so racing
    workers store each kernel once."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def get(self, signature: KernelSignature) -> KernelEntry | None:
        """The entry built for exactly `signature`, counting the hit; None on a miss (a row under
        the same key whose stored signature differs is a hash collision, not a hit)."""
        key = signature.key
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
        sig = entry.signature
        values = {part: getattr(sig, part) for part in _SIGNATURE_PARTS} | {
            "key": entry.key,
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
            "size_bytes": entry.size_bytes,
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
