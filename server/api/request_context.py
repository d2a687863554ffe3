"""What every HTTP request gets around it: its own log scope (server/core/log_context.py), so
the lines written while it is handled, uvicorn's access line included, carry its tenant and
job id once authentication has named them; and its time in the latency histogram
(server/api/request_metrics.py)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.api.request_metrics import REQUEST_SECONDS, route_template
from server.core import log_context


class RequestScopeMiddleware:
    """Runs each HTTP request inside a fresh log scope and times it once its response is sent
    (or it failed)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), 500  # an exception out of the app is answered 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with log_context.bound():
            try:
                await self.app(scope, receive, send_status)
            finally:
                REQUEST_SECONDS.labels(route_template(scope), scope["method"], str(status)).observe(
                    time.perf_counter() - start)
