"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(request: Request) -> JSONResponse | dict:
    """The database and the broker are reachable (503 naming what is not)."""
    problems = []
    try:
        with request.app.state.sessions() as s:
            s.execute(text("SELECT 1"))
    except Exception as e:
        problems.append(f"database unreachable: {type(e).__name__}")
    try:
        with request.app.state.celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as e:
        problems.append(f"broker unreachable: {type(e).__name__}")
    if problems:
        return JSONResponse({"status": "unavailable", "detail": "; ".join(problems)}, status_code=503)
    return {"status": "ok"}
