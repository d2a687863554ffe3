"""Kernel rows and the compiler version: rows another compiler built are stale (kept,
shown, evicted by policy); the worker's cache itself is worker/kernel_cache.py."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session

from compiler.cache import compiler_fingerprint
from server.db.models import Kernel


def mark_stale_kernels(session: Session) -> int:
    """Flag rows built by another compiler version as stale (and un-flag current ones); returns rows changed."""
    current = compiler_fingerprint()
    went_stale = session.execute(update(Kernel).where(Kernel.compiler_fingerprint != current,
                                                      Kernel.stale.is_(False)).values(stale=True))
    came_back = session.execute(update(Kernel).where(Kernel.compiler_fingerprint == current,
                                                     Kernel.stale.is_(True)).values(stale=False))
    return went_stale.rowcount + came_back.rowcount

