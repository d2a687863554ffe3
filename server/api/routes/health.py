"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from server.services.health import readiness_problems

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict:
    """The process is up (answered in the event loop: it never waits for a worker thread)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
async def readyz(request: Request) -> JSONResponse | dict:
    """The database and the broker are reachable (503 naming what is not)."""
    gate = request.app.state.gate
    async with gate.slot():
        problems = await run_in_threadpool(readiness_problems, gate.sessions, request.app.state.celery)
    if problems:
        return JSONResponse({"status": "unavailable", "detail": "; ".join(problems)}, status_code=503)
    return {"status": "ok"}
