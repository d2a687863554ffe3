"""Per-tenant quotas: the settings' defaults, overridden per tenant in `tenant_limits`, and
the checks an upload or a submission passes before it is accepted (403 / 413 naming the
limit and the setting behind it)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.core.config import Settings
from server.db.models import TERMINAL, Artifact, Job, Model, Tenant, TenantLimits
from server.services.errors import ServiceError


@dataclass(frozen=True)
class Limits:
    """One tenant's effective limits."""

    max_stored_bytes: int
    max_models: int
    max_active_jobs: int
    requests_per_minute: int
    private_kernels: bool


# Each limit's setting, named in refusals so an operator knows what to raise.
QUOTAS = ("max_stored_bytes", "max_models", "max_active_jobs", "requests_per_minute")


def setting_name(limit: str) -> str:
    """The environment variable of a limit's default (`TILEFORGE_TENANT_MAX_MODELS`)."""
    return f"TILEFORGE_TENANT_{limit.upper()}"


def limits_of(session: Session, tenant_id: str, settings: Settings) -> Limits:
    """The tenant's limits: its overrides where it has them, the settings' defaults elsewhere."""
    row = session.get(TenantLimits, tenant_id)
    values = {name: getattr(row, name, None) for name in QUOTAS}
    return Limits(**{name: getattr(settings, f"tenant_{name}") if v is None else v for name, v in values.items()},
                  private_kernels=bool(row is not None and row.private_kernels))


def set_limits(session: Session, tenant_name: str, **overrides: int | bool | None) -> TenantLimits:
    """Set some of a tenant's overrides (`None` for a quota: back to the default); the
    tenant must exist. Returns its row."""
    tenant = session.scalar(select(Tenant).where(Tenant.name == tenant_name))
    if tenant is None:
        raise ServiceError(404, f"tenant {tenant_name!r} not found")
    row = session.get(TenantLimits, tenant.id) or TenantLimits(tenant_id=tenant.id, private_kernels=False)
    known = {f.name for f in fields(Limits)}
    for name, value in overrides.items():
        if name not in known:
            raise ValueError(f"unknown limit {name!r}")
        setattr(row, name, value)
    session.add(row)
    return row


def stored_bytes(session: Session, tenant_id: str) -> int:
    """Bytes of the tenant's models and artifacts (each counted for its tenant, even where
    storage keeps one copy of bytes two tenants uploaded)."""
    models = session.scalar(select(func.coalesce(func.sum(Model.size), 0)).where(Model.tenant_id == tenant_id))
    artifacts = session.scalar(select(func.coalesce(func.sum(Artifact.size), 0))
                               .where(Artifact.tenant_id == tenant_id))
    return int(models or 0) + int(artifacts or 0)


def check_upload(session: Session, settings: Settings, tenant: Tenant, size: int) -> None:
    """Refuse a new model of `size` bytes over the tenant's model count (403) or stored bytes (413)."""
    limits = limits_of(session, tenant.id, settings)
    count = session.scalar(select(func.count()).select_from(Model).where(Model.tenant_id == tenant.id)) or 0
    if count >= limits.max_models:
        raise ServiceError(403, f"model limit reached: tenant {tenant.name!r} keeps {count} of "
                                f"{limits.max_models} models ({setting_name('max_models')}); delete one first")
    used = stored_bytes(session, tenant.id)
    if used + size > limits.max_stored_bytes:
        raise ServiceError(413, f"stored-bytes limit: tenant {tenant.name!r} keeps {used} bytes, and this "
                                f"{size}-byte model would pass its limit of {limits.max_stored_bytes} "
                                f"({setting_name('max_stored_bytes')})")


def check_submission(session: Session, settings: Settings, tenant: Tenant, new_jobs: int) -> None:
    """Refuse `new_jobs` more jobs over the tenant's queued + running jobs, or once its
    stored bytes are at their limit (an artifact would add to them): 403 naming the limit."""
    limits = limits_of(session, tenant.id, settings)
    active = session.scalar(select(func.count()).select_from(Job)
                            .where(Job.tenant_id == tenant.id, Job.status.not_in(TERMINAL))) or 0
    if active + new_jobs > limits.max_active_jobs:
        raise ServiceError(403, f"active-jobs limit: tenant {tenant.name!r} has {active} queued or running "
                                f"jobs, and {new_jobs} more would pass its limit of {limits.max_active_jobs} "
                                f"({setting_name('max_active_jobs')}); wait for some to finish")
    used = stored_bytes(session, tenant.id)
    if used >= limits.max_stored_bytes:
        raise ServiceError(403, f"stored-bytes limit reached: tenant {tenant.name!r} keeps {used} of "
                                f"{limits.max_stored_bytes} bytes ({setting_name('max_stored_bytes')}); "
                                "delete models to make room for artifacts")
