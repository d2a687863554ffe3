"""Fields every log line carries while a request or a job is handled (job id, tenant).

A context variable holds one dict per request or job. It is mutable on purpose: a request's
tenant is known only once its token is checked, in a dependency that runs in a worker
thread with a copy of the context; the copy refers to the same dict, so what the dependency
adds is seen by every later line of the request, in the event loop or in other threads.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator

FIELDS = ("job_id", "tenant")  # always present on a record, "-" outside a request or job

_current: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("tileforge_log_fields",
                                                                                 default=None)


def open_scope(**fields: str | None) -> contextvars.Token:
    """Start a scope (a request, a job) whose log lines carry `fields` and whatever `add`
    adds, nested in the current one; `close_scope(token)` ends it."""
    return _current.set({**(_current.get() or {}), **{k: v for k, v in fields.items() if v is not None}})


def close_scope(token: contextvars.Token) -> None:
    """End the scope `open_scope` returned `token` for."""
    _current.reset(token)


@contextlib.contextmanager
def bound(**fields: str | None) -> Iterator[None]:
    """A scope for the duration of a `with` block (`open_scope` ... `close_scope`)."""
    token = open_scope(**fields)
    try:
        yield
    finally:
        close_scope(token)


def add(**fields: str | None) -> None:
    """Add fields to the current scope's lines (nothing outside a scope)."""
    values = _current.get()
    if values is not None:
        values.update({k: v for k, v in fields.items() if v is not None})


def current() -> dict[str, str]:
    """The current scope's fields (empty outside one)."""
    return dict(_current.get() or {})


class ContextFilter(logging.Filter):
    """Puts the current scope's fields on every record a handler formats."""

    def filter(self, record: logging.LogRecord) -> bool:
        values = _current.get() or {}
        for name in FIELDS:
            setattr(record, name, values.get(name, "-"))
        return True
