"""The migration chain from an empty database, on SQLite and PostgreSQL."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from server.db.migrate import MIGRATIONS, downgrade, upgrade
from server.db.models import Base

TABLES = {"tenants", "tokens", "models", "jobs", "artifacts", "kernels", "workers", "idempotency_keys", "tenant_limits",
          "run_jobs"}


def _last_revision() -> str:
    """The newest migration's number: the files are numbered in order, one chain."""
    return max(p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py"))


def _check_chain(url: str) -> None:
    engine = create_engine(url)
    try:
        upgrade(url)
        assert set(inspect(engine).get_table_names()) >= TABLES
        with engine.connect() as c:
            diff = compare_metadata(MigrationContext.configure(c), Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
        downgrade(url, "base")
        assert not TABLES & set(inspect(engine).get_table_names())
        upgrade(url)
        with engine.connect() as c:
            assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == _last_revision()
    finally:
        engine.dispose()


def test_migration_chain_on_sqlite(tmp_path):
    _check_chain(f"sqlite:///{tmp_path}/m.sqlite")


@pytest.mark.services
def test_migration_chain_on_postgres(empty_postgres_url):
    _check_chain(empty_postgres_url)


def _check_retention_backfill(url: str) -> None:
    """0007 gives kernel rows written before it their size, and models an unpinned flag."""
    engine = create_engine(url)
    try:
        upgrade(url, "0004")
        with engine.begin() as c:
            c.execute(text("INSERT INTO kernels (key, op_pattern, shapes, dtypes, te_hash, target_fingerprint, "
                           "compiler_fingerprint, options, tile_config, te_json, source, \"binary\", extras, "
                           "hit_count, created_at, last_used_at, stale) VALUES ('k', 'Relu', '[]', '[]', 'h', "
                           "'cpu:x:1', 'c', '{}', '{}', 'te', 'source', :b, '{}', 0, :t, :t, false)"),
                      {"b": b"\x00\x01\x02", "t": "2026-01-01 00:00:00+00:00"})
        upgrade(url)
        with engine.connect() as c:
            assert c.execute(text("SELECT size_bytes FROM kernels WHERE key = 'k'")).scalar() == 2 + 6 + 3
    finally:
        engine.dispose()


def test_retention_backfill_on_sqlite(tmp_path):
    _check_retention_backfill(f"sqlite:///{tmp_path}/m.sqlite")


@pytest.mark.services
def test_retention_backfill_on_postgres(empty_postgres_url):
    _check_retention_backfill(empty_postgres_url)
