"""Known hardware targets (public: no token needed)."""

from __future__ import annotations

from fastapi import APIRouter

from compiler.target import get_target, list_targets

router = APIRouter(prefix="/targets", tags=["targets"])


@router.get("")
def targets() -> list[dict]:
    """Every target a compilation may name, with its memory levels and fingerprint."""
    return [get_target(name).describe() for name in list_targets()]
