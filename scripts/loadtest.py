"""Load test: N concurrent clients for D seconds against a live `tileforge serve --with-worker`.

Each client, as one of ten tenants, loops: upload a small model (one of a pool of distinct
ones, so most uploads store a new model and some repeat one), get it, list its models, read
the kernel list; every tenth upload (of all clients together) also submits a CPU
compilation. Reported per run: requests/s, p50 / p99 latency, the 5xx and connection-error count, other statuses,
and the jobs' outcomes after a drain period. It starts the service itself, fresh for each
client count: on the embedded default (SQLite, SQLite broker), or with `--backend postgres`
on a new PostgreSQL database and Redis (dropped / cleaned afterwards). The per-tenant
request rate is raised for the run (a capacity test, not a test of the limiter); every
other setting is the default. Only 127.0.0.1 is ever contacted.

    .venv/bin/python scripts/loadtest.py --clients 50 200 --duration 60
    .venv/bin/python scripts/loadtest.py --backend postgres --clients 50 200 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from embedded_throughput import small_model
from live_service import ROOT, TERMINAL, served

sys.path.insert(0, str(ROOT))  # the service's own modules: tokens are created in its database

TENANTS = 10
MODEL_POOL = 100
PG_ADMIN = os.environ.get("TILEFORGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("TILEFORGE_TEST_REDIS", "redis://127.0.0.1:6379/0")


@dataclass
class Tally:
    """Every request's latency and outcome, and the jobs submitted."""

    seconds: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    connection_errors: int = 0
    uploads: int = 0  # by every client: each tenth of them compiles
    jobs: list[tuple[str, str]] = field(default_factory=list)  # (token, job id)

    async def send(self, client: httpx.AsyncClient, method: str, url: str, **kw) -> httpx.Response | None:
        start = time.perf_counter()
        try:
            r = await client.request(method, url, **kw)
        except httpx.TransportError:
            self.connection_errors += 1
            return None
        self.seconds.append(time.perf_counter() - start)
        self.statuses[r.status_code] += 1
        return r


async def one_client(url: str, token: str, models: list[bytes], offset: int, until: float, tally: Tally) -> None:
    """One client's loop until `until` (monotonic)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        uploads = 0
        while time.monotonic() < until:
            data = models[(offset + uploads) % len(models)]
            uploads += 1
            tally.uploads += 1
            compiles = tally.uploads % 10 == 0
            r = await tally.send(client, "POST", "/v1/models", files={"file": ("m.onnx", data)})
            if r is None or r.status_code not in (200, 201):
                continue
            model_id = r.json()["id"]
            await tally.send(client, "GET", f"/v1/models/{model_id}")
            await tally.send(client, "GET", "/v1/models", params={"limit": 20})
            await tally.send(client, "GET", "/v1/kernels", params={"limit": 20})
            if compiles:
                r = await tally.send(client, "POST", "/v1/compilations", json={"model_id": model_id, "target": "cpu"})
                if r is not None and r.status_code == 202:
                    tally.jobs.append((token, r.json()["id"]))


async def job_outcomes(url: str, jobs: list[tuple[str, str]], drain: float) -> Counter:
    """The jobs' states once all have ended, or when `drain` seconds have passed."""
    deadline, states = time.monotonic() + drain, {}
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while True:
            for token, job in jobs:
                if states.get(job) not in TERMINAL:
                    r = await client.get(f"/v1/compilations/{job}", headers={"Authorization": f"Bearer {token}"})
                    states[job] = r.json()["status"] if r.status_code == 200 else f"http {r.status_code}"
            if all(s in TERMINAL for s in states.values()) or time.monotonic() > deadline:
                return Counter(states.values())
            await asyncio.sleep(2)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def make_tokens(env: dict[str, str]) -> list[str]:
    """One token per tenant, created in the service's database."""
    from server.core.config import Settings
    from server.core.security import create_token
    from server.db.session import one_off_transaction

    settings = Settings(home=Path(env["TILEFORGE_HOME"]), database_url=env.get("DATABASE_URL"))
    with one_off_transaction(settings.db_url) as s:
        return [create_token(s, f"load{i}") for i in range(TENANTS)]


@contextlib.contextmanager
def backend_env(backend: str, home: Path) -> Iterator[dict[str, str]]:
    """The service's environment: a fresh home, and for `postgres` a new database and Redis
    keys of the run's own (removed afterwards)."""
    env = {"TILEFORGE_HOME": str(home), "TILEFORGE_TENANT_REQUESTS_PER_MINUTE": "100000000",
           "TILEFORGE_QUEUE_PREFIX": f"load{secrets.token_hex(3)}"}
    if backend == "embedded":
        yield env
        return
    from sqlalchemy import create_engine, text

    name = f"tileforge_load_{os.getpid()}_{secrets.token_hex(3)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield env | {"DATABASE_URL": PG_ADMIN.rsplit("/", 1)[0] + f"/{name}", "REDIS_URL": REDIS}
    finally:
        import redis

        client = redis.Redis.from_url(REDIS)
        for key in client.scan_iter(f"*{env['TILEFORGE_QUEUE_PREFIX']}*"):
            client.delete(key)
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def run(backend: str, clients: int, duration: float, drain: float) -> dict:
    """One run on a fresh service: its figures."""
    models = [small_model(seed) for seed in range(MODEL_POOL)]
    with tempfile.TemporaryDirectory(prefix="tileforge-load-") as tmp, \
            backend_env(backend, Path(tmp) / "home") as env, \
            served(env, Path(tmp) / "serve.log", ("--no-token",)) as url:
        tokens = make_tokens(env)
        tally, load_before = Tally(), os.getloadavg()

        async def clients_for(seconds: float) -> float:
            start = time.monotonic()
            await asyncio.gather(*(one_client(url, tokens[i % TENANTS], models, i, start + seconds, tally)
                                   for i in range(clients)))
            return time.monotonic() - start

        elapsed = asyncio.run(clients_for(duration))
        load_during = os.getloadavg()
        outcomes = asyncio.run(job_outcomes(url, tally.jobs, drain))
    return {"backend": backend, "clients": clients, "seconds": round(elapsed, 1),
            "requests": len(tally.seconds), "requests_per_s": round(len(tally.seconds) / elapsed, 1),
            "p50_ms": round(1000 * percentile(tally.seconds, 50)), "p99_ms": round(1000 * percentile(tally.seconds, 99)),
            "5xx": sum(n for s, n in tally.statuses.items() if s >= 500),
            "connection_errors": tally.connection_errors,
            "statuses": dict(sorted(tally.statuses.items())), "jobs": len(tally.jobs), "job_outcomes": dict(outcomes),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_at_end": [round(x, 2) for x in load_during]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("embedded", "postgres"), default="embedded")
    p.add_argument("--clients", type=int, nargs="+", default=[50, 200])
    p.add_argument("--duration", type=float, default=60.0, help="seconds each run sends requests")
    p.add_argument("--drain", type=float, default=120.0,
                   help="seconds to wait afterwards for the submitted jobs to end")
    a = p.parse_args()
    for clients in a.clients:
        result = run(a.backend, clients, a.duration, a.drain)
        print(json.dumps(result), flush=True)
        print(f"{result['backend']}, {clients} clients, {result['seconds']} s: {result['requests_per_s']} requests/s, "
              f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, {result['5xx']} x 5xx, "
              f"{result['connection_errors']} connection errors; jobs {result['jobs']}: {result['job_outcomes']}; "
              f"load average {result['load_average_before']} -> {result['load_average_at_end']}", flush=True)


if __name__ == "__main__":
    main()
