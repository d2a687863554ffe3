"""The shape of a tiling as the cost model reads it.

`compiler.schedule.plan.TileConfig` is the concrete type; the cost layer sits
below schedule, so it names only the fields it reads.
"""

from __future__ import annotations

from typing import Protocol


class Tiling(Protocol):
    """Per spatial axis `block` (outputs per task / thread block) and `thread` (register
    tile); per reduce axis `reduce_step`; `vector` elements per innermost access."""

    @property
    def block(self) -> tuple[int, ...]: ...

    @property
    def thread(self) -> tuple[int, ...]: ...

    @property
    def reduce_step(self) -> tuple[int, ...]: ...

    @property
    def vector(self) -> int: ...
