"""Request dependencies (Annotated): settings, database session, storage, job queue, current tenant."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from server.core import log_context
from server.core.config import Settings
from server.core.security import Grant, bearer_grant
from server.db.models import Tenant
from server.jobs.queue import JobQueue
from server.services.quotas import limits_of, setting_name
from server.storage import Storage

bearer = HTTPBearer(auto_error=False, description="a token from `tileforge token create --tenant NAME`")


async def app_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    return request.app.state.settings


async def get_session(request: Request) -> AsyncIterator[Session]:
    """A database session for one request, admitted by the app's connection gate
    (server/api/connection_gate.py) and closed as soon as the endpoint has returned."""
    async with request.app.state.gate.session() as session:
        yield session


async def get_storage(request: Request) -> Storage:
    """Where models and artifacts are kept."""
    return request.app.state.storage


async def get_job_queue(request: Request) -> JobQueue:
    """The Celery queues compile jobs go to."""
    return request.app.state.job_queue


SettingsDep = Annotated[Settings, Depends(app_settings)]
# scope="function": the session closes once the endpoint's response is built, not after
# the body is sent (a download or an event stream must not hold a connection).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
StorageDep = Annotated[Storage, Depends(get_storage)]
JobQueueDep = Annotated[JobQueue, Depends(get_job_queue)]


def get_current_tenant(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Tenant:
    """The tenant of the bearer token: 401 naming what is wrong with the token, 403 when its
    scope forbids the request, 429 with `Retry-After` over the tenant's request rate."""
    header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
    grant = bearer_grant(session, header)
    if isinstance(grant, str):
        raise HTTPException(401, grant, headers={"WWW-Authenticate": "Bearer"})
    return admit(request, session, settings, grant)


def admit(request: Request, session: Session, settings: Settings, grant: Grant) -> Tenant:
    """The tenant of an authenticated `grant`, once its request is allowed (API and dashboard
    alike): its log lines carry the tenant (and the job it names) from here on; 403 when the
    token's scope forbids the request, 429 with `Retry-After` over the tenant's request rate."""
    log_context.add(tenant=grant.tenant.name, job_id=request.path_params.get("job_id"))
    refusal = grant.refusal(request.method)
    if refusal is not None:
        raise HTTPException(403, refusal)
    take_request(request, session, settings, grant.tenant)
    return grant.tenant


def take_request(request: Request, session: Session, settings: Settings, tenant: Tenant) -> None:
    """Count one request against the tenant's rate (the API's and the dashboard's alike): 429
    with `Retry-After` over it."""
    per_minute = limits_of(session, tenant.id, settings).requests_per_minute
    wait = request.app.state.rate_limiter.take(tenant.id, per_minute)
    if wait > 0:
        raise HTTPException(429, f"rate limit: tenant {tenant.name!r} may make {per_minute} requests per "
                                 f"minute ({setting_name('requests_per_minute')})",
                            headers={"Retry-After": str(math.ceil(wait))})


TenantDep = Annotated[Tenant, Depends(get_current_tenant)]



@dataclass(frozen=True)
class PageParams:
    """`limit` and `offset` of a list endpoint."""

    limit: int
    offset: int

    def of(self, items: Sequence, total: int) -> dict:
        """A page body for `items` out of `total`."""
        return {"items": list(items), "total": total, "limit": self.limit, "offset": self.offset}


# Databases take 64-bit signed offsets; a larger one was an OverflowError (500), not a 422.
MAX_OFFSET = (1 << 63) - 1


async def page_params(limit: Annotated[int, Query(ge=1, le=500)] = 50,
                offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0) -> PageParams:
    """Paging from the query string (limit 1..500, 0 <= offset < 2**63)."""
    return PageParams(limit, offset)


PageDep = Annotated[PageParams, Depends(page_params)]


IdempotencyKeyHeader = Annotated[str | None, Header(
    alias="Idempotency-Key", min_length=1, max_length=255,
    description="a key unique to this submission (a UUID): sent again with a retry, it returns the "
                "jobs the first request created instead of new ones")]
