"""Engines and sessions for PostgreSQL or SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str) -> Engine:
    """An engine for `url`; on SQLite, with WAL and a busy timeout so the API and
    workers (separate processes) can write the same file."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, future=True)
    path = url.split("///", 1)[-1]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_conn, _record) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return engine


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
