"""How consecutive tiles of a row-major grid spread over its dims."""

from __future__ import annotations

from collections.abc import Sequence


def row_major_span(grid: Sequence[int], count: int) -> tuple[int, ...]:
    """Per dim, how many positions `count` consecutive grid points (innermost dim fastest,
    starting at the origin) cover: the box that a warp of threads, or a wave of tiles
    launched together, occupies."""
    left, spans = max(1, count), []
    for n in reversed(grid):
        take = max(1, min(n, left))
        spans.append(take)
        left = -(-left // take)
    return tuple(reversed(spans))
