"""Readiness: whether the database and the broker answer."""

from __future__ import annotations

from collections.abc import Callable

from celery import Celery
from sqlalchemy import text
from sqlalchemy.orm import Session


def readiness_problems(sessions: Callable[[], Session], celery: Celery) -> list[str]:
    """What is unreachable (the database, the broker), by name; [] when both answer."""
    problems = []
    try:
        with sessions() as s:
            s.execute(text("SELECT 1"))
    except Exception as e:
        problems.append(f"database unreachable: {type(e).__name__}")
    try:
        with celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as e:
        problems.append(f"broker unreachable: {type(e).__name__}")
    return problems


