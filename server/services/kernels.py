"""The kernel cache as users browse it: filtered pages and single kernels of the shared
cache and of the tenant's own private namespace, never another tenant's
(server/db/kernel_namespace.py)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session, defer

from compiler.errors import TargetError
from compiler.target import get_target
from server.db.kernel_namespace import visible_kernel, visible_to
from server.db.models import Kernel, Tenant
from server.services.errors import ServiceError


def list_kernels(session: Session, tenant: Tenant, limit: int, offset: int, target: str | None = None,
                 op: str | None = None, stale: bool | None = None) -> tuple[Sequence[Kernel], int]:
    """A page of the kernels the tenant may see (without source or binary), most recently
    used first, and the count; `target` is a target name (`cpu`, `cuda:a100`) or a
    fingerprint prefix (`cuda:sm_80`), `op` a substring of the op pattern."""
    where = [visible_to(tenant.id)]
    if target:
        where.append(Kernel.target_fingerprint.startswith(_fingerprint_prefix(target), autoescape=True))
    if op:
        where.append(Kernel.op_pattern.contains(op, autoescape=True))
    if stale is not None:
        where.append(Kernel.stale.is_(stale))
    rows = session.scalars(select(Kernel).where(*where).options(defer(Kernel.source), defer(Kernel.binary))
                           .order_by(Kernel.last_used_at.desc(), Kernel.key).limit(limit).offset(offset)).all()
    return rows, session.scalar(select(func.count()).select_from(Kernel).where(*where)) or 0


def get_kernel(session: Session, tenant: Tenant, key: str) -> Kernel:
    """One kernel the tenant may see, source included (404 otherwise)."""
    row = visible_kernel(session, tenant.id, key)
    if row is None:
        raise ServiceError(404, f"kernel {key[:80]!r} not found")
    return row


def _fingerprint_prefix(target: str) -> str:
    """`kind:arch:` of a known target name (kernels built with any toolchain version); else as given."""
    try:
        t = get_target(target)
    except TargetError:
        return target
    return f"{t.kind}:{t.arch}:"
