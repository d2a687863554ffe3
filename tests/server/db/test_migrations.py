"""The migration chain from an empty database, on SQLite and PostgreSQL."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from server.db.migrate import downgrade, upgrade
from server.db.models import Base

TABLES = {"tenants", "tokens", "models", "jobs", "artifacts", "kernels", "workers", "idempotency_keys", "tenant_limits"}


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
            assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0006"
    finally:
        engine.dispose()


def test_migration_chain_on_sqlite(tmp_path):
    _check_chain(f"sqlite:///{tmp_path}/m.sqlite")


@pytest.mark.services
def test_migration_chain_on_postgres(empty_postgres_url):
    _check_chain(empty_postgres_url)
