"""The shared kernel cache (no weights in it, so every tenant may read it)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from sqlalchemy import func, select
from sqlalchemy.orm import defer

from compiler.errors import TargetError
from compiler.target import get_target
from server.api.deps import PageDep, SessionDep, TenantDep
from server.api.schemas import KernelDetail, KernelOut, Page
from server.db.models import Kernel

router = APIRouter(prefix="/kernels", tags=["kernels"])


@router.get("", response_model=Page[KernelOut])
def list_kernels(session: SessionDep, _: TenantDep, page: PageDep, target: str | None = None,
                 op: str | None = None, stale: bool | None = None) -> dict:
    """Cached kernels, most recently used first; `target` is a target name (`cpu`, `cuda:a100`)
    or a fingerprint prefix (`cuda:sm_80`), `op` a substring of the op pattern."""
    where = []
    if target:
        where.append(Kernel.target_fingerprint.startswith(_fingerprint_prefix(target), autoescape=True))
    if op:
        where.append(Kernel.op_pattern.contains(op, autoescape=True))
    if stale is not None:
        where.append(Kernel.stale.is_(stale))
    rows = session.scalars(select(Kernel).where(*where).options(defer(Kernel.source), defer(Kernel.binary))
                           .order_by(Kernel.last_used_at.desc(), Kernel.key)
                           .limit(page.limit).offset(page.offset)).all()
    return page.of(rows, session.scalar(select(func.count()).select_from(Kernel).where(*where)))


@router.get("/{key}", response_model=KernelDetail)
def get_kernel(key: str, session: SessionDep, _: TenantDep) -> KernelDetail:
    """One kernel with its source."""
    row = session.get(Kernel, key)
    if row is None:
        raise HTTPException(404, f"kernel {key[:80]!r} not found")
    out = KernelOut.model_validate(row).model_dump()
    return KernelDetail(**out, source=row.source, te_json=row.te_json, binary_size=len(row.binary),
                        extras=row.extras or {})


def _fingerprint_prefix(target: str) -> str:
    """`kind:arch:` of a known target name (kernels built with any toolchain version); else as given."""
    try:
        t = get_target(target)
    except TargetError:
        return target
    return f"{t.kind}:{t.arch}:"
