"""Every error leaves as JSON `{"detail": "<message naming the problem>"}`, never a stack trace."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from compiler.errors import ModelError
from server.api.allowed_methods import allowed_methods
from server.services.errors import ServiceError

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5  # what a 503 asks the client to wait before trying again


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            reason = err.get("ctx", {}).get("error", "invalid JSON")
            parts.append(f"request body is not valid JSON: {reason} at character {err['loc'][-1]}")
            continue
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "request"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Register the JSON error handlers on `app`."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        headers = exc.headers
        if exc.status_code == 405 and (allow := allowed_methods(request)):
            headers = {**(headers or {}), "Allow": allow}
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> JSONResponse:
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if exc.status == 503 else None
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=headers)

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def database_unreachable(request: Request, exc: DBAPIError) -> JSONResponse:
        # The database went away (restarting, unreachable): the client should come back,
        # not be told the server broke. The pool reconnects by itself on a later request.
        log.warning("database error on %s %s: %s", request.method, request.url.path,
                    (str(exc.orig) or type(exc.orig).__name__).splitlines()[0][:200])
        return JSONResponse({"detail": "the database is unreachable; try again shortly"}, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_SECONDS)})

    @app.exception_handler(PoolTimeout)
    async def database_busy(request: Request, exc: PoolTimeout) -> JSONResponse:
        # No connection came free in TILEFORGE_DB_POOL_TIMEOUT: the service is overloaded
        # (or another process shares the pool's database), not broken.
        log.warning("no database connection for %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse({"detail": "the database is busy; try again shortly"}, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_SECONDS)})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _validation_message(exc)}, status_code=422)

    @app.exception_handler(ModelError)
    async def model_error(_: Request, exc: ModelError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse({"detail": f"internal error ({type(exc).__name__}); see the server log"},
                            status_code=500)
