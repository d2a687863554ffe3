"""The client's exceptions: one class per kind of answer the server gives, each carrying
the server's own message (`{"detail": ...}`), its HTTP status and any `Retry-After`."""

from __future__ import annotations

import httpx


class ClientError(Exception):
    """Anything the client could not do; `status` is the HTTP status when the server answered."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.retry_after = message, status, retry_after


class BadRequest(ClientError):
    """400 / 422: the request is invalid (an unknown target or option, a model the compiler refuses)."""


class AuthError(ClientError):
    """401 / 403: no token, or one that is invalid, expired or revoked; a read-only token on
    a change; or a tenant quota reached (models, queued + running jobs: the message names it)."""


class NotFound(ClientError):
    """404: no such model, job or artifact for this tenant."""


class Conflict(ClientError):
    """409: the object's state forbids it (cancelling a finished job, deleting a busy model)."""


class TooLarge(ClientError):
    """413: the upload is larger than the server's limit, or than the tenant's stored-bytes quota."""


class TooManyRequests(ClientError):
    """429: slow down; `retry_after` says for how long (already waited out by bounded retries)."""


class ServerError(ClientError):
    """5xx: the server failed, or (503) its database or broker is unreachable for now."""


class Unreachable(ClientError):
    """The server could not be reached, even after retries with backoff."""


class JobError(ClientError):
    """A job cannot give what was asked: no artifact (it failed or was cancelled), or still running."""


class ChecksumMismatch(ClientError):
    """A download's bytes do not have the sha256 the server announced (nothing was kept)."""


class WaitTimeout(ClientError, TimeoutError):
    """`Job.wait` ran out of time before the job finished."""


_BY_STATUS: dict[int, type[ClientError]] = {400: BadRequest, 401: AuthError, 403: AuthError, 404: NotFound,
                                            409: Conflict, 413: TooLarge, 422: BadRequest, 429: TooManyRequests}


def retry_after(response: httpx.Response) -> float | None:
    """The response's `Retry-After` in seconds (the delta-seconds form), or None."""
    value = response.headers.get("Retry-After", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def error_for(response: httpx.Response) -> ClientError:
    """The exception for an error response, with the server's message."""
    try:
        body = response.json()
        message = body["detail"] if isinstance(body, dict) and isinstance(body.get("detail"), str) else str(body)
    except ValueError:
        message = response.text.strip()[:500] or response.reason_phrase
    status = response.status_code
    kind = _BY_STATUS.get(status) or (ServerError if status >= 500 else BadRequest)
    return kind(f"{message} (HTTP {status})", status, retry_after(response))
