"""create_app(): the FastAPI application (OpenAPI at /docs)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
from collections.abc import AsyncIterator

import anyio
from fastapi import FastAPI
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from server.api.connection_gate import ConnectionGate
from server.api.errors import install_error_handlers
from server.api.main import api_router
from server.api.rate_limit import rate_limiter
from server.api.request_context import RequestScopeMiddleware
from server.api.routes import health, metrics
from server.api.upload_limit import UploadLimitMiddleware
from server.core.config import Settings, get_settings
from server.core.security import bearer_grant
from server.db.kernel_cache import mark_stale_kernels
from server.db.session import make_sessionmaker, settings_engine, transaction
from server.jobs.queue import JobQueue, create_celery
from server.jobs.reaper import sweep
from server.storage import LocalStorage, Storage

log = logging.getLogger(__name__)

DASHBOARD_MODULE = "server.dashboard"  # exposes `router`; mounted when present


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API wired to `settings` (default: from the environment)."""
    settings = settings or get_settings()
    engine = settings_engine(settings)
    sessions = make_sessionmaker(engine)
    gate = ConnectionGate(sessions, settings.db_connections)
    celery = create_celery(settings)
    job_queue = JobQueue(celery, settings)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        def mark_stale() -> None:
            with transaction(sessions) as s:
                mark_stale_kernels(s)

        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.api_threads
        await run_in_threadpool(mark_stale)
        reaper = asyncio.create_task(_reap_forever(settings, sessions, gate, job_queue, app.state.storage))
        try:
            yield
        finally:
            reaper.cancel()
            engine.dispose()

    app = FastAPI(title="tileforge", version="0.1.0", lifespan=lifespan,
                  description="ONNX in, tiled C / CUDA C kernels out: upload a model, compile it for a "
                              "target on a worker, download an artifact that runs.")
    app.state.settings = settings
    app.state.sessions = sessions
    app.state.gate = gate
    app.state.storage = LocalStorage(settings.storage_root)
    app.state.celery = celery
    app.state.job_queue = job_queue
    app.state.rate_limiter = rate_limiter(settings)
    install_error_handlers(app)
    async def authorize(header: str | None) -> tuple[int, str] | None:
        try:
            grant = await gate.run(lambda s: bearer_grant(s, header))
        except (OperationalError, InterfaceError):
            return None  # the route's own token check answers the outage (503)
        if isinstance(grant, str):
            return 401, grant
        refusal = grant.refusal("POST")
        return None if refusal is None else (403, refusal)

    app.add_middleware(UploadLimitMiddleware, paths=("/v1/models",), max_bytes=settings.max_upload_bytes,
                       authorize=authorize)
    app.add_middleware(UploadLimitMiddleware, paths=("/v1/inferences",), max_bytes=settings.max_inference_bytes,
                       authorize=authorize, setting="TILEFORGE_MAX_INFERENCE_BYTES")
    # Outermost: every line of a request is in its log scope, and refusals of the upload
    # limits are timed too.
    app.add_middleware(RequestScopeMiddleware)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(api_router)
    if importlib.util.find_spec(DASHBOARD_MODULE) is not None:
        app.include_router(importlib.import_module(DASHBOARD_MODULE).router)
    return app


async def _reap_forever(settings: Settings, sessions: sessionmaker[Session], gate: ConnectionGate,
                        job_queue: JobQueue, storage: Storage) -> None:
    """Every reaper interval: re-queue or fail jobs whose worker went silent, publish again
    queued jobs whose message may be lost, and apply retention (`reaper.sweep`)."""
    while True:
        await asyncio.sleep(settings.reaper_interval_seconds)
        try:
            async with gate.slot():
                await run_in_threadpool(sweep, sessions, job_queue.enqueue, settings, storage)
        except Exception as e:  # keep reaping; the database may come back
            log.warning("reaper pass failed: %s", e)
