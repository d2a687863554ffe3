"""The one error the service layer raises: a message naming the problem, and the HTTP
status the app answers it with (server/api/errors.py turns it into JSON; dashboard routes
show the message on the page)."""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy.orm import Session

from server.db.models import Tenant


class ServiceError(Exception):
    """A request the service refuses: `status` (4xx / 503) and `detail` for the user."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


Row = TypeVar("Row")


def owned(session: Session, kind: type[Row], row_id: str, tenant: Tenant, noun: str) -> Row:
    """The tenant's row `row_id`; another tenant's rows are as absent as missing ones (404)."""
    row = session.get(kind, row_id)
    if row is None or row.tenant_id != tenant.id:  # type: ignore[attr-defined]
        raise ServiceError(404, f"{noun} {row_id[:80]!r} not found")
    return row
