"""Kernel cache statistics and eviction on SQLite and PostgreSQL: by staleness, by age, and
down to a byte cap (stale rows first, then least recently used), also from the reaper."""

from datetime import timedelta

from sqlalchemy import select, update

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
from server.core.config import Settings
from server.db.models import Kernel
from server.db.session import transaction
from server.db.types import utcnow
from server.jobs.reaper import sweep
from server.services import cache_admin
from server.storage import LocalStorage
from worker.kernel_cache import DatabaseKernelCache

CPU, GPU = "cpu:x86_64:0123456789abcdef", "cuda:sm_90:0123456789abcdef"


def put(sessions, op: str, size: int, idle_days: float, target: str = CPU, fingerprint: str | None = None,
        hits: int = 0) -> KernelEntry:
    """A kernel of about `size` bytes, last used `idle_days` ago."""
    sig = KernelSignature(op_pattern=op, shapes="[[4]]", dtypes='["float32"]', te_hash="cd" * 32,
                          target_fingerprint=target, compiler_fingerprint=fingerprint or compiler_fingerprint(),
                          options="{}")
    entry = KernelEntry(signature=sig, tile_config={}, source="s" * size, binary=b"")
    DatabaseKernelCache(sessions).put(entry)
    with transaction(sessions) as s:
        s.execute(update(Kernel).where(Kernel.key == entry.key)
                  .values(last_used_at=utcnow() - timedelta(days=idle_days), hit_count=hits))
    return entry


def keys(sessions) -> set[str]:
    with sessions() as s:
        return set(s.scalars(select(Kernel.op_pattern)))


def test_stats_count_rows_bytes_hits_and_stale_per_target(db_sessions):
    put(db_sessions, "A", 100, 1, hits=3)
    put(db_sessions, "B", 50, 1, target=GPU, hits=2)
    put(db_sessions, "Old", 10, 1, fingerprint="0" * 16)
    with db_sessions() as s:
        stats = cache_admin.cache_stats(s)
    assert stats.total == cache_admin.CacheTotals(rows=3, bytes=160, hits=5, stale=1)
    assert stats.by_target == {CPU: cache_admin.CacheTotals(2, 110, 3, 1), GPU: cache_admin.CacheTotals(1, 50, 2, 0)}


def test_evict_to_bytes_takes_stale_rows_first_then_the_least_recently_used(db_sessions):
    put(db_sessions, "Recent", 100, 0)
    put(db_sessions, "Older", 100, 5)
    put(db_sessions, "Oldest", 100, 9)
    put(db_sessions, "StaleButRecent", 100, 0, fingerprint="0" * 16)
    with transaction(db_sessions) as s:
        assert cache_admin.evict_to_bytes(s, 250) == cache_admin.Evicted(rows=2, bytes=200)
    assert keys(db_sessions) == {"Recent", "Older"}
    with transaction(db_sessions) as s:
        assert cache_admin.evict_to_bytes(s, 250) == cache_admin.Evicted()  # already under the cap


def test_evict_stale_and_older_than(db_sessions):
    put(db_sessions, "Fresh", 10, 0)
    put(db_sessions, "Idle", 10, 40)
    put(db_sessions, "Stale", 10, 0, fingerprint="0" * 16)
    with transaction(db_sessions) as s:
        assert cache_admin.evict_stale(s).rows == 1
    with transaction(db_sessions) as s:
        assert cache_admin.evict_older_than(s, 30 * 86400) == cache_admin.Evicted(1, 10)
    assert keys(db_sessions) == {"Fresh"}


def test_a_hit_refreshes_a_row_against_lru_eviction(db_sessions):
    old = put(db_sessions, "UsedAgain", 100, 9)
    put(db_sessions, "Untouched", 100, 5)
    assert DatabaseKernelCache(db_sessions).get(old.signature) is not None  # last used: now
    with transaction(db_sessions) as s:
        cache_admin.evict_to_bytes(s, 100)
    assert keys(db_sessions) == {"UsedAgain"}


def test_the_reaper_keeps_the_cache_under_its_cap(db_sessions, tmp_path):
    for n in range(4):
        put(db_sessions, f"K{n}", 1000, n)
    settings = Settings(home=tmp_path, kernel_cache_max_bytes=2500)
    sweep(db_sessions, lambda *a: None, settings, LocalStorage(tmp_path / "store"))
    assert keys(db_sessions) == {"K0", "K1"}
