"""HTTP with the retries a remote service needs: connection errors and 502/503/504 are
retried with exponential backoff, 429 and 503 after the server's `Retry-After` (bounded);
anything else that is not 2xx becomes the typed exception of tileforge.errors.

Every request is retried, so the client sends only requests that are safe to repeat:
GETs, submissions with an `Idempotency-Key` (the server answers a repeated key with the
first request's jobs), content-addressed uploads (the same bytes give the same model),
and cancels (a repeated one is a 409 the caller reads as "already finished")."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tileforge.errors import Unreachable, error_for

RETRIED_STATUSES = (429, 502, 503, 504)
USER_AGENT = "tileforge-client/0.1"


def new_idempotency_key() -> str:
    """A fresh key for one submission (sent again, unchanged, by each of its retries)."""
    return uuid.uuid4().hex


class Transport:
    """One server's HTTP connection pool, token and retry policy."""

    def __init__(self, url: str, token: str | None, *, timeout: float = 60.0, retries: int = 4,
                 backoff: float = 0.5, max_retry_after: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"User-Agent": USER_AGENT} | ({"Authorization": f"Bearer {token}"} if token else {})
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout, transport=transport)
        self.retries, self.backoff, self.max_retry_after = retries, backoff, max_retry_after

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def request(self, method: str, path: str, *, idempotency_key: str | None = None,
                files: Callable[[], dict[str, Any]] | None = None, **kwargs: Any) -> httpx.Response:
        """Send a request (retrying as the module says) and return its 2xx response; `files`
        is a function giving the multipart files anew for each attempt."""
        with self.stream(method, path, idempotency_key=idempotency_key, files=files, **kwargs) as r:
            r.read()
            return r

    @contextmanager
    def stream(self, method: str, path: str, *, idempotency_key: str | None = None,
               files: Callable[[], dict[str, Any]] | None = None, **kwargs: Any) -> Iterator[httpx.Response]:
        """Like `request`, the body left unread for the caller to stream (retries cover
        getting the response, not reading its body)."""
        if idempotency_key is not None:
            kwargs["headers"] = kwargs.get("headers", {}) | {"Idempotency-Key": idempotency_key}
        attempt = 0
        while True:
            try:
                request = self.http.build_request(method, path, files=files() if files else None, **kwargs)
                response = self.http.send(request, stream=True)
            except httpx.TransportError as e:
                if attempt >= self.retries:
                    raise Unreachable(f"cannot reach {self.http.base_url}: {type(e).__name__}: {e}") from None
                self._sleep(attempt, None)
                attempt += 1
                continue
            if response.status_code in RETRIED_STATUSES and attempt < self.retries:
                response.read()
                response.close()
                self._sleep(attempt, error_for(response).retry_after)
                attempt += 1
                continue
            try:
                if response.is_error:
                    response.read()
                    raise error_for(response)
                yield response
            finally:
                response.close()
            return

    def _sleep(self, attempt: int, retry_after: float | None) -> None:
        delay = self.backoff * 2 ** attempt if retry_after is None else retry_after
        time.sleep(min(delay, self.max_retry_after))

