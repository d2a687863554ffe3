"""Engines and sessions for PostgreSQL or SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:
    from server.core.config import Settings


@dataclass(frozen=True)
class PoolSize:
    """How many connections an engine keeps (`size`), may open beyond that under load
    (`overflow`), and how long a checkout waits for one (`timeout`, seconds)."""

    size: int = 5
    overflow: int = 10
    timeout: float = 30.0


def make_engine(url: str, pool: PoolSize = PoolSize()) -> Engine:
    """An engine for `url` with a `pool` of connections; on SQLite, with WAL and a busy
    timeout so the API and workers (separate processes) can write the same file."""
    sizing = {"pool_size": pool.size, "max_overflow": pool.overflow, "pool_timeout": pool.timeout}
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, **sizing)
    path = url.split("///", 1)[-1]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, **sizing)
    else:  # an in-memory database lives in one connection: no pool to size
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_conn, _record) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return engine


def settings_engine(settings: Settings) -> Engine:
    """The engine of the service's database, its pool sized by `settings`."""
    return make_engine(settings.db_url, PoolSize(settings.db_pool_size, settings.db_max_overflow,
                                                 settings.db_pool_timeout))


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose objects stay readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    with factory() as session, session.begin():
        yield session


@contextmanager
def one_off_transaction(url: str) -> Iterator[Session]:
    """A transaction on a short-lived engine (commands and tools that touch the database once)."""
    engine = make_engine(url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            yield session
    finally:
        engine.dispose()
