"""The kernel cache as an operator manages it: what it holds, and eviction (by staleness, by
age, and down to a size cap, least recently used first with stale rows before any other)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import case, delete, func, or_, select
from sqlalchemy.orm import Session

from compiler.cache import compiler_fingerprint
from server.db.models import Kernel
from server.db.types import utcnow


@dataclass(frozen=True)
class CacheTotals:
    """Rows, bytes, hits and stale rows of one part of the cache."""

    rows: int
    bytes: int
    hits: int
    stale: int


@dataclass(frozen=True)
class CacheStats:
    """The whole cache, and the same per target fingerprint."""

    total: CacheTotals
    by_target: dict[str, CacheTotals] = field(default_factory=dict)


def _obsolete() -> object:
    """True for rows no current worker will serve: marked stale, or built by another compiler."""
    return or_(Kernel.stale.is_(True), Kernel.compiler_fingerprint != compiler_fingerprint())


def cache_stats(session: Session) -> CacheStats:
    """Rows, bytes, hit counts and stale rows, in all and per target fingerprint."""
    columns = (func.count(), func.coalesce(func.sum(Kernel.size_bytes), 0),
               func.coalesce(func.sum(Kernel.hit_count), 0),
               func.coalesce(func.sum(case((_obsolete(), 1), else_=0)), 0))
    total = CacheTotals(*(int(v) for v in session.execute(select(*columns)).one()))
    rows = session.execute(select(Kernel.target_fingerprint, *columns).group_by(Kernel.target_fingerprint)
                           .order_by(Kernel.target_fingerprint)).all()
    return CacheStats(total, {fp: CacheTotals(*(int(v) for v in rest)) for fp, *rest in rows})


@dataclass(frozen=True)
class Evicted:
    """What an eviction removed."""

    rows: int = 0
    bytes: int = 0

    def __add__(self, other: Evicted) -> Evicted:
        return Evicted(self.rows + other.rows, self.bytes + other.bytes)


def _delete_where(session: Session, *where: object) -> Evicted:
    freed = session.scalar(select(func.coalesce(func.sum(Kernel.size_bytes), 0)).where(*where))
    rows = session.execute(delete(Kernel).where(*where)).rowcount
    return Evicted(rows, int(freed or 0))


def evict_stale(session: Session) -> Evicted:
    """Delete every row built by another compiler (or marked stale)."""
    return _delete_where(session, _obsolete())


def evict_older_than(session: Session, seconds: float, now: datetime | None = None) -> Evicted:
    """Delete every row not used for `seconds`."""
    return _delete_where(session, Kernel.last_used_at < (now or utcnow()) - timedelta(seconds=seconds))


def evict_to_bytes(session: Session, max_bytes: int) -> Evicted:
    """Delete rows until the cache holds at most `max_bytes`: stale rows first, then the least
    recently used."""
    excess = int(session.scalar(select(func.coalesce(func.sum(Kernel.size_bytes), 0))) or 0) - max_bytes
    if excess <= 0:
        return Evicted()
    order = (case((_obsolete(), 0), else_=1), Kernel.last_used_at, Kernel.key)
    victims, freed = [], 0
    for key, size in session.execute(select(Kernel.key, Kernel.size_bytes).order_by(*order)):
        if freed >= excess:
            break
        victims.append(key)
        freed += size
    evicted = Evicted()
    for start in range(0, len(victims), 500):  # bounded IN lists
        evicted += _delete_where(session, Kernel.key.in_(victims[start:start + 500]))
    return evicted
