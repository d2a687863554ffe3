"""Model-supplied names in messages: shortened and quoted, since they may be anything."""

from __future__ import annotations

_MAX_SHOWN = 80


def shorten(name: str) -> str:
    """`name` cut to a bounded length (noting the full length) for error messages."""
    if len(name) > _MAX_SHOWN:
        return f"{name[:_MAX_SHOWN]}...({len(name)} chars)"
    return name


def shown(name: str) -> str:
    """A quoted, escaped, bounded rendering of a model-supplied name."""
    return repr(shorten(name))
