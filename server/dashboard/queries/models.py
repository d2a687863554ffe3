"""A tenant's uploaded models, with how often each was compiled."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.dashboard.queries.paging import Page, paginate
from server.db.models import Job, Model


@dataclass(frozen=True)
class ModelRow:
    """A model and its number of compile jobs."""

    model: Model
    jobs: int


def model_page(session: Session, tenant_id: str, page: int = 1, per_page: int = 25) -> Page[ModelRow]:
    """The tenant's models, newest first."""
    result = paginate(session, select(Model).where(Model.tenant_id == tenant_id)
                      .order_by(Model.created_at.desc(), Model.id), page, per_page)
    ids = [m.id for m in result.rows]
    counts = dict(session.execute(select(Job.model_id, func.count()).where(Job.model_id.in_(ids))
                                  .group_by(Job.model_id)).all()) if ids else {}
    rows = [ModelRow(m, counts.get(m.id, 0)) for m in result.rows]
    return Page(rows, result.total, result.page, result.per_page)


def get_model(session: Session, tenant_id: str, model_id: str) -> Model | None:
    """The tenant's model `model_id`; another tenant's model is as absent as a missing one."""
    model = session.get(Model, model_id)
    return model if model is not None and model.tenant_id == tenant_id else None
