"""One page of rows and where it sits among all of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

Row = TypeVar("Row")


@dataclass(frozen=True)
class Page(Generic[Row]):
    """Rows `offset+1 .. offset+len(rows)` of `total`."""

    rows: list[Row]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def first(self) -> int:
        return (self.page - 1) * self.per_page + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return (self.page - 1) * self.per_page + len(self.rows)


def paginate(session: Session, query: Select, page: int, per_page: int) -> Page:
    """Run `query` for one page (pages count from 1; a page past the end shows the last one)."""
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    pages = max(1, -(-total // per_page))
    page = min(max(page, 1), pages)
    rows = list(session.scalars(query.limit(per_page).offset((page - 1) * per_page)))
    return Page(rows, total, page, per_page)
