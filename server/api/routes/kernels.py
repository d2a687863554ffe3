"""The kernel cache: the shared one and the tenant's private namespace (no weights in either)."""

from __future__ import annotations

from fastapi import APIRouter

from server.api.deps import PageDep, SessionDep, TenantDep
from server.api.schemas import KernelDetail, KernelOut, Page
from server.services import kernels as service

router = APIRouter(prefix="/kernels", tags=["kernels"])


@router.get("", response_model=Page[KernelOut])
def list_kernels(session: SessionDep, tenant: TenantDep, page: PageDep, target: str | None = None,
                 op: str | None = None, stale: bool | None = None) -> dict:
    """Cached kernels this tenant may see (shared, and its own private ones), most recently used first; `target` is a target name (`cpu`, `cuda:a100`)
    or a fingerprint prefix (`cuda:sm_80`), `op` a substring of the op pattern."""
    rows, total = service.list_kernels(session, tenant, page.limit, page.offset, target, op, stale)
    return page.of(rows, total)


@router.get("/{key}", response_model=KernelDetail)
def get_kernel(key: str, session: SessionDep, tenant: TenantDep) -> KernelDetail:
    """One kernel with its source."""
    row = service.get_kernel(session, tenant, key)
    out = KernelOut.model_validate(row).model_dump()
    return KernelDetail(**out, source=row.source, te_json=row.te_json, binary_size=len(row.binary),
                        extras=row.extras or {})
