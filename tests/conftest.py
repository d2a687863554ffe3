"""Shared fixtures. The service part: a fresh PostgreSQL database and Redis DB per test
session, an SQLite home per test, settings pointing at them, and real `celery worker`
subprocesses. Tests needing the real services are marked `services` and skip with a
reason when PostgreSQL or Redis is unreachable."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from service_kit import (
    FAST_JOB_SETTINGS,
    PG_ADMIN_URL,
    REDIS_SERVER,
    ROOT,
    OnnxModels,
    WorkerProcess,
    create_database,
    live_api,
    migrated,
    reachable,
)

# The suite neither reads nor writes the user's tileforge home: a CPU measured there (`tileforge
# targets --measure`, `make bench`) replaced the host target's derived peak, and cost-model tests
# then saw that machine's numbers (test_cpu_bounds failed on a Xeon after a bench run). Set before
# any test imports the compiler; worker subprocesses inherit it.
_HOME = tempfile.mkdtemp(prefix="tileforge-test-home-")
os.environ["TILEFORGE_HOME"] = _HOME
atexit.register(shutil.rmtree, _HOME, True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test session (dropped at the end)."""
    from sqlalchemy import create_engine, make_url, text

    server = make_url(PG_ADMIN_URL)
    if not reachable(server.host or "127.0.0.1", server.port or 5432):
        pytest.skip(f"PostgreSQL is not reachable at {server.host}:{server.port} (TILEFORGE_TEST_PG)")

    name = f"tileforge_test_{os.getpid()}_{secrets.token_hex(3)}"
    # pre-ping: the pooled connection may be dead by the end (a test restarts PostgreSQL)
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    try:
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as e:
        admin.dispose()
        pytest.skip(f"cannot create a PostgreSQL test database: {e}")
    yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as c:
        for db in c.execute(text("SELECT datname FROM pg_database WHERE datname LIKE :p"),
                            {"p": f"{name}%"}).scalars().all():
            c.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis URL on a DB number picked for this session (queue names are unique too)."""
    from urllib.parse import urlsplit

    server = urlsplit(REDIS_SERVER)
    if not reachable(server.hostname or "127.0.0.1", server.port or 6379):
        pytest.skip(f"Redis is not reachable at {server.netloc} (TILEFORGE_TEST_REDIS)")
    return f"redis://{server.netloc}/{1 + os.getpid() % 15}"


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SQLite file at the head revision, copied by tests that need a fresh database."""
    path = tmp_path_factory.mktemp("template") / "tileforge.sqlite"
    migrated(f"sqlite:///{path}")
    return path


@pytest.fixture
def embedded_settings(tmp_path: Path, migrated_sqlite: Path):
    """Settings of the embedded default (SQLite, local folder, SQLite broker) in a fresh home."""
    import shutil

    from server.core.config import Settings

    settings = Settings(home=tmp_path / "home", queue_prefix=f"t{secrets.token_hex(4)}", **FAST_JOB_SETTINGS)
    settings.home.mkdir()
    shutil.copy(migrated_sqlite, settings.home / "tileforge.sqlite")
    return settings


@pytest.fixture(scope="module")
def pg_redis_settings(postgres_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory):
    """Settings on the session's PostgreSQL database and Redis, with this module's own queues."""
    from server.core.config import Settings

    home = tmp_path_factory.mktemp("pg-home")
    settings = Settings(home=home, database_url=postgres_url, redis_url=redis_url,
                        queue_prefix=f"t{secrets.token_hex(4)}", **FAST_JOB_SETTINGS)
    migrated(settings.db_url)
    yield settings
    import redis

    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"*{settings.queue_prefix}*"):  # this module's queues and bindings
        client.delete(key)
    client.close()


@pytest.fixture(scope="module")
def start_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., WorkerProcess]]:
    """Start workers on given settings; all are stopped when the module ends."""
    started: list[WorkerProcess] = []

    def start(settings, name: str = "w1", queues: str = "cpu") -> WorkerProcess:
        log = tmp_path_factory.mktemp("worker") / f"{name}.log"
        env = os.environ | settings.to_env() | {"PYTHONUNBUFFERED": "1"}
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "server.cli", "worker", "--queues", queues,
                 "--hostname", f"{name}@{settings.queue_prefix}", "--loglevel", "INFO"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        worker = WorkerProcess(process, log)
        started.append(worker)
        deadline = time.monotonic() + 60
        while " ready." not in worker.output():
            if process.poll() is not None or time.monotonic() > deadline:
                worker.kill()
                raise RuntimeError(f"worker {name} did not start:\n{worker.output()[-3000:]}")
            time.sleep(0.2)
        return worker

    yield start
    for w in started:
        w.kill()  # no graceful shutdown to wait for: the module's queues are deleted with it


@pytest.fixture(scope="module")
def start_server(module_tmp: Path) -> Iterator[Callable[..., str]]:
    """Start the API on given settings in a real uvicorn process on a free port; returns its
    URL. All are stopped when the module ends (their output in the module's tmp folder)."""
    with contextlib.ExitStack() as servers:
        def start(settings) -> str:
            return servers.enter_context(live_api(settings, module_tmp / f"uvicorn-{secrets.token_hex(3)}.log"))

        yield start


@pytest.fixture
def empty_postgres_url(postgres_url: str) -> str:
    """A new, empty PostgreSQL database (no migrations applied)."""
    return create_database(postgres_url, secrets.token_hex(3))


@pytest.fixture(scope="session")
def postgres_unit_url(postgres_url: str) -> str:
    """A migrated PostgreSQL database for unit tests, emptied after each (dropped with the session's)."""
    return migrated(create_database(postgres_url, "unit"))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def db_sessions(request: pytest.FixtureRequest, tmp_path: Path):
    """A sessionmaker on a migrated, empty database: SQLite, and PostgreSQL when reachable."""
    import shutil

    from sqlalchemy import text

    from server.db.models import Base
    from server.db.session import make_engine, make_sessionmaker

    if request.param == "sqlite":
        shutil.copy(request.getfixturevalue("migrated_sqlite"), tmp_path / "db.sqlite")
        engine = make_engine(f"sqlite:///{tmp_path}/db.sqlite")
        yield make_sessionmaker(engine)
        engine.dispose()
        return
    engine = make_engine(request.getfixturevalue("postgres_unit_url"))
    yield make_sessionmaker(engine)
    with engine.begin() as c:
        tables = ", ".join(t.name for t in Base.metadata.sorted_tables)
        c.execute(text(f"TRUNCATE {tables} CASCADE"))
    engine.dispose()


@pytest.fixture(scope="session")
def onnx_models() -> OnnxModels:
    return OnnxModels()


@pytest.fixture
def api(embedded_settings):
    """A TestClient on the embedded-default app (no worker), and the settings behind it."""
    from fastapi.testclient import TestClient

    from server.main import create_app

    with TestClient(create_app(embedded_settings)) as client:
        client.settings = embedded_settings
        yield client


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("module")

