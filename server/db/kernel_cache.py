"""Kernel rows: written from and read back as the compiler's KernelEntry, and marked stale
when another compiler built them (kept, shown, evicted by policy); the worker's cache
itself is worker/kernel_cache.py."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
from server.db.kernel_namespace import namespaced_key
from server.db.models import Kernel
from server.db.types import utcnow

SIGNATURE_PARTS = ("op_pattern", "shapes", "dtypes", "te_hash", "target_fingerprint",
                   "compiler_fingerprint", "options")


def insert_kernel(session: Session, entry: KernelEntry, namespace: str | None = None) -> bool:
    """Insert `entry` into `namespace` (None: the shared cache; else a tenant's private one,
    server/db/kernel_namespace.py) unless its key is already stored there (the first writer
    wins); True if inserted."""
    sig = entry.signature
    now = utcnow()
    values = {part: getattr(sig, part) for part in SIGNATURE_PARTS} | {
        "key": namespaced_key(namespace, entry.key),
        "namespace": namespace,
        "tile_config": entry.tile_config,
        "te_json": entry.te_json,
        "source": entry.source,
        "binary": entry.binary,
        "estimated_us": entry.estimated_us,
        "measured_us": entry.measured_us,
        "validation_error": entry.validation_error,
        "extras": entry.extras,
        "hit_count": 0,
        "created_at": now,
        "last_used_at": now,
        "stale": sig.compiler_fingerprint != compiler_fingerprint(),
        "size_bytes": entry.size_bytes,
    }
    dialect = postgresql if session.bind.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(Kernel).values(**values).on_conflict_do_nothing(index_elements=["key"])
    return session.execute(insert.returning(Kernel.key)).scalar() is not None  # no row back: it was there


def entry_of(row: Kernel) -> KernelEntry:
    """The compiler's view of a kernel row."""
    return KernelEntry(
        signature=KernelSignature(**{part: getattr(row, part) for part in SIGNATURE_PARTS}),
        tile_config=row.tile_config,
        source=row.source,
        binary=row.binary,
        te_json=row.te_json,
        estimated_us=row.estimated_us,
        measured_us=row.measured_us,
        validation_error=row.validation_error,
        extras=row.extras or {},
    )


def mark_stale_kernels(session: Session) -> int:
    """Flag rows built by another compiler version as stale (and un-flag current ones); returns rows changed."""
    current = compiler_fingerprint()
    went_stale = session.execute(update(Kernel).where(Kernel.compiler_fingerprint != current,
                                                      Kernel.stale.is_(False)).values(stale=True))
    came_back = session.execute(update(Kernel).where(Kernel.compiler_fingerprint == current,
                                                     Kernel.stale.is_(True)).values(stale=False))
    return went_stale.rowcount + came_back.rowcount

