"""Many clients at once against a real uvicorn: every request is answered, none with a 5xx.

Before the connection gate (server/api/connection_gate.py), 100 concurrent
`GET /v1/models` on PostgreSQL answered 80 x 500 after the pool's 30 s timeout: the
worker threads were all waiting for connections held by requests waiting for a thread.
The PostgreSQL case runs with a pool of 3 connections and a 5 s checkout timeout, so
that any request that waited on the pool instead of the gate would fail here.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures

import httpx
import pytest
from service_kit import auth, live_api, make_token

pytestmark = pytest.mark.slow

CLIENTS = 200


async def _burst(url: str, token: str, model_id: str) -> tuple[collections.Counter, list[dict]]:
    """CLIENTS requests at once: list calls, job submissions, liveness and readiness; the
    status count per (method, path), and the submitted jobs."""
    limits = httpx.Limits(max_connections=CLIENTS + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, headers=auth(token)) as client:
        async def call(method: str, path: str, **kw) -> httpx.Response:
            return await client.request(method, path, **kw)

        requests = []
        for i in range(CLIENTS):
            if i % 4 == 0:
                requests.append(("POST", "/v1/compilations", {"json": {"model_id": model_id, "target": "cpu"}}))
            elif i % 20 == 1:
                requests.append(("GET", "/readyz", {}))
            elif i % 20 == 2:
                requests.append(("GET", "/healthz", {}))
            else:
                requests.append(("GET", "/v1/models", {"params": {"limit": 5}}))
        responses = await asyncio.gather(*(call(m, p, **kw) for m, p, kw in requests))
    statuses = collections.Counter((m, p, r.status_code) for (m, p, _), r in zip(requests, responses, strict=True))
    jobs = [r.json() for (m, _, _), r in zip(requests, responses, strict=True) if m == "POST" and r.status_code == 202]
    return statuses, jobs


def _check(url: str, token: str, data: bytes) -> None:
    with httpx.Client(base_url=url, headers=auth(token), timeout=60) as client:
        model = client.post("/v1/models", files={"file": ("m.onnx", data)}).json()
        # A thread of its own: an earlier test module (Playwright's sync API) may have left
        # an event loop running in this one.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            statuses, jobs = pool.submit(asyncio.run, _burst(url, token, model["id"])).result()
        server_errors = {k: n for k, n in statuses.items() if k[2] >= 500}
        assert not server_errors, f"5xx under {CLIENTS} concurrent clients: {server_errors}"
        assert {k[2] for k in statuses} <= {200, 202}, statuses
        assert len(jobs) == CLIENTS // 4 == len({j["id"] for j in jobs})
        listed = client.get("/v1/compilations", params={"model_id": model["id"], "limit": 500}).json()
        assert listed["total"] == len(jobs)


@pytest.mark.services
def test_postgres_small_pool_serves_many_clients(pg_redis_settings, module_tmp, onnx_models):
    settings = pg_redis_settings.model_copy(update={"db_pool_size": 3, "db_max_overflow": 0, "db_pool_timeout": 5.0})
    token = make_token(settings, "crowd")
    with live_api(settings, module_tmp / "uvicorn-pg.log") as url:
        _check(url, token, onnx_models.mlp(seed=71))


def test_embedded_default_serves_many_clients(module_tmp, onnx_models):
    from server.core.config import Settings
    from server.db.migrate import upgrade

    settings = Settings(home=module_tmp / "home", queue_prefix="crowd")
    upgrade(settings.db_url)
    token = make_token(settings, "crowd")
    with live_api(settings, module_tmp / "uvicorn-sqlite.log") as url:
        _check(url, token, onnx_models.mlp(seed=72))
