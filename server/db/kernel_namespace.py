"""Private kernel namespaces. A tenant with `private_kernels` set keeps the kernels its
compiles build out of the shared cache: they are stored under a key derived from the
tenant and the kernel's own key, marked with the tenant's id in `namespace`, found only
by that tenant's compiles, and shown only to that tenant. Its compiles read and write
its namespace alone (not the shared cache either: a hit would leave a trace on a shared
row, telling others which kernels it uses). Every other tenant sees the shared cache and
never another tenant's private kernels.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields

from sqlalchemy import ColumnElement, or_
from sqlalchemy.orm import Session

from compiler.cache import KernelSignature
from server.db.models import Kernel, TenantLimits

SHARED, PRIVATE = "shared", "private"


def namespaced_key(namespace: str | None, key: str) -> str:
    """The row key of kernel `key` in `namespace` (the key itself in the shared cache)."""
    return key if namespace is None else hashlib.sha256(f"{namespace}:{key}".encode()).hexdigest()


def kernel_namespace(session: Session, tenant_id: str) -> str | None:
    """The namespace the tenant's compiles use: its own when it keeps its kernels private."""
    limits = session.get(TenantLimits, tenant_id)
    return tenant_id if limits is not None and limits.private_kernels else None


def visible_to(tenant_id: str) -> ColumnElement[bool]:
    """Kernels a tenant may see: the shared cache and its own private namespace."""
    return or_(Kernel.namespace.is_(None), Kernel.namespace == tenant_id)


def visible_kernel(session: Session, tenant_id: str, key: str) -> Kernel | None:
    """The kernel a tenant means by `key`: a row key it may see, or a compiler key (as a
    job's report names it) of a kernel in its own private namespace."""
    for row_key in (namespaced_key(tenant_id, key), key):
        row = session.get(Kernel, row_key)
        if row is not None and row.namespace in (None, tenant_id):
            return row
    return None


def compiler_key(row: Kernel) -> str:
    """The key the compiler (and a job's report) gives the kernel of `row`, in any namespace."""
    if row.namespace is None:
        return row.key
    return KernelSignature(**{f.name: getattr(row, f.name) for f in fields(KernelSignature)}).key


def namespace_label(namespace: str | None) -> str:
    """How a kernel's namespace is shown (only its own tenant ever sees a private one)."""
    return SHARED if namespace is None else PRIVATE
