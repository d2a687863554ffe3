"""Refuse uploads before their bodies are read: without a valid token (401, after the
headers alone), or larger than the limit (413, up front or while they stream in)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The Authorization header's value -> None when it names a live token that may upload, else
# the status (401, or 403 for a read-only token) and the problem.
Authorize = Callable[[str | None], Awaitable[tuple[int, str] | None]]

MULTIPART_OVERHEAD = 64 * 1024  # boundaries and part headers around the file


class UploadLimitMiddleware:
    """A 413 for POST bodies to `paths` larger than `max_bytes` (plus multipart overhead).

    A declared Content-Length is checked up front; a chunked body is counted as it
    arrives. The route checks the file part itself against the exact limit. With
    `authorize`, a request without a live bearer token gets its 401 (a read-only one its
    403) before any of its
    body is read (else anyone could make the server take a whole upload per request).
    """

    def __init__(self, app: ASGIApp, paths: tuple[str, ...], max_bytes: int,
                 authorize: Authorize | None = None, setting: str = "TILEFORGE_MAX_UPLOAD_BYTES") -> None:
        self.app, self.paths, self.max_bytes, self.authorize = app, paths, max_bytes, authorize
        self.setting = setting  # the variable that sets the limit, named in the 413

    def _message(self) -> str:
        return f"upload is larger than the limit of {self.max_bytes} bytes ({self.setting})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.authorize is not None:
            header = headers.get(b"authorization")
            problem = await self.authorize(None if header is None else header.decode("latin-1"))
            if problem is not None:
                status, detail = problem
                await _refuse(send, status, detail, [(b"www-authenticate", b"Bearer")] if status == 401 else None)
                return
        allowed = self.max_bytes + MULTIPART_OVERHEAD
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > allowed:
            await _refuse(send, 413, self._message())
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > allowed:
                raise HTTPException(413, self._message())
            return message

        await self.app(scope, counted, send)


async def _refuse(send: Send, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer `{"detail": detail}` with `status` without reading the request body."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})
