"""GET /metrics: Prometheus's text format. Jobs, queues, stage durations and cache hits come
from the database at scrape time (the same from every API process); request latency is the
answering process's own (server/api/request_metrics.py).

Access: with `TILEFORGE_METRICS_TOKEN` set, a scrape must send it as a bearer token; unset,
only clients on this host (loopback) may scrape. Tenants' tokens never open it: the numbers
are the whole service's, every tenant's together (no label names a tenant).
"""

from __future__ import annotations

import ipaddress
import os
import secrets

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.concurrency import run_in_threadpool

from server.api import request_metrics
from server.api.job_metrics import exposition
from server.core.config import Settings
from server.services.metrics import job_metrics

router = APIRouter(tags=["operations"])


def _check_access(request: Request, settings: Settings) -> None:
    """401 without the metrics token where one is set; 403 from another host where none is."""
    if settings.metrics_token:
        sent = request.headers.get("authorization", "")
        if not secrets.compare_digest(sent.encode(), f"Bearer {settings.metrics_token}".encode()):
            raise HTTPException(401, "/metrics needs the bearer token set in TILEFORGE_METRICS_TOKEN",
                                headers={"WWW-Authenticate": "Bearer"})
        return
    host = request.client.host if request.client else ""
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    if not local:
        raise HTTPException(403, "/metrics answers only clients on this host unless TILEFORGE_METRICS_TOKEN is set")


def _request_exposition() -> bytes:
    """Request latency: this process's, or this host's processes' in multiprocess mode."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(request_metrics.REGISTRY)


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """The service's metrics in Prometheus's text format."""
    settings = request.app.state.settings
    _check_access(request, settings)
    jobs = await request.app.state.gate.run(job_metrics)
    body = exposition(jobs, settings) + await run_in_threadpool(_request_exposition)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
