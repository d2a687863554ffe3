"""JSON of the plan's frozen dataclasses: tuples written as lists, read back as tuples,
so that a decision read from a manifest or the kernel cache equals the one made."""

from __future__ import annotations

import dataclasses
from typing import Any


def as_json(value: Any) -> dict[str, Any]:
    """Dataclass `value` as a JSON object (nested dataclasses as objects, tuples as lists)."""
    return _lists(dataclasses.asdict(value))


def _lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_lists(v) for v in value]
    return value


def tuples(value: Any) -> Any:
    """JSON lists back into the (nested) tuples the dataclasses hold."""
    return tuple(tuples(v) for v in value) if isinstance(value, list) else value
