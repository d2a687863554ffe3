"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from server.services.health import readiness_problems

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(request: Request) -> JSONResponse | dict:
    """The database and the broker are reachable (503 naming what is not)."""
    problems = readiness_problems(request.app.state.sessions, request.app.state.celery)
    if problems:
        return JSONResponse({"status": "unavailable", "detail": "; ".join(problems)}, status_code=503)
    return {"status": "ok"}
