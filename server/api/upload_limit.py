"""Refuse oversized uploads while they stream in, before the body is parsed or stored."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MULTIPART_OVERHEAD = 64 * 1024  # boundaries and part headers around the file


class UploadLimitMiddleware:
    """A 413 for POST bodies to `paths` larger than `max_bytes` (plus multipart overhead).

    A declared Content-Length is checked up front; a chunked body is counted as it
    arrives. The route checks the file part itself against the exact limit.
    """

    def __init__(self, app: ASGIApp, paths: tuple[str, ...], max_bytes: int) -> None:
        self.app, self.paths, self.max_bytes = app, paths, max_bytes

    def _message(self) -> str:
        return f"upload is larger than the limit of {self.max_bytes} bytes (TILEFORGE_MAX_UPLOAD_BYTES)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        allowed = self.max_bytes + MULTIPART_OVERHEAD
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > allowed:
            body = json.dumps({"detail": self._message()}).encode()
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
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
