"""Arena placement by liveness: intermediates whose lifetimes overlap never share bytes.

Greedy by size with best fit: buffers are placed largest first; each goes into
the smallest gap, among the buffers already placed that are live at the same
time, that holds it (else after the last of them). Lifetimes are inclusive of
both ends, so a kernel's output (first live at its step) never aliases an
input whose last use is that same step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compiler.aligned import ALIGNMENT


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    """`n` rounded up to a multiple of `alignment`."""
    return -(-n // alignment) * alignment


@dataclass(frozen=True)
class Lifetime:
    """A buffer's size and the steps at which it is live, `first` and `last` included."""

    nbytes: int
    first: int
    last: int

    def __post_init__(self) -> None:
        if self.nbytes < 0 or self.first > self.last:
            raise ValueError(f"bad lifetime {self}")

    def overlaps(self, other: Lifetime) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class ArenaLayout:
    """Byte offset of every buffer in the arena, and the arena's size."""

    offsets: dict[int, int]
    total: int


def place(lifetimes: Mapping[int, Lifetime], alignment: int = ALIGNMENT) -> ArenaLayout:
    """Assign `alignment`-aligned offsets so that buffers live at the same step are disjoint."""
    # Every buffer takes at least one aligned slot, so distinct buffers get distinct pointers.
    sizes = {b: align_up(max(lt.nbytes, 1), alignment) for b, lt in lifetimes.items()}
    order = sorted(lifetimes, key=lambda b: (-sizes[b], lifetimes[b].first, b))
    offsets: dict[int, int] = {}
    placed_at: dict[int, list[int]] = {}  # step -> buffers placed so far that are live then
    for b in order:
        lt = lifetimes[b]
        # Indexing by step keeps this near-linear for the short lifetimes of real graphs.
        overlapping = {p for step in range(lt.first, lt.last + 1) for p in placed_at.get(step, ())}
        busy = sorted((offsets[p], offsets[p] + sizes[p]) for p in overlapping)
        best: int | None = None
        best_gap = 0
        cursor = 0
        for start, end in busy:
            gap = start - cursor
            if gap >= sizes[b] and (best is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, end)
        offsets[b] = cursor if best is None else best
        for step in range(lt.first, lt.last + 1):
            placed_at.setdefault(step, []).append(b)
    total = max((offsets[b] + sizes[b] for b in offsets), default=0)
    return ArenaLayout(offsets, total)
