"""A kernel's tile config read level by level: what each number holds, and where it lives."""

from __future__ import annotations

from dataclasses import dataclass

# (tile config field, CPU memory level, CUDA memory level, what the numbers are)
LEVELS = (
    ("block", "L2 (one core's task)", "shared memory (one thread block)",
     "outputs one task computes, per spatial axis"),
    ("reduce_step", "L1 (staged per step)", "shared memory (staged per step)",
     "reduction chunk loaded per step, per reduce axis"),
    ("thread", "registers", "registers (one thread)", "register tile of outputs, per spatial axis"),
    ("vector", "SIMD lanes", "vector loads", "elements per vector access on the innermost axis"),
)


@dataclass(frozen=True)
class TileLevel:
    """One row of the tile table."""

    level: str
    field: str
    values: str
    meaning: str


def _values(value: object) -> str:
    if isinstance(value, list | tuple):
        return " \u00d7 ".join(str(v) for v in value) if value else "(none)"
    return str(value)


def tile_levels(tile_config: dict, target_fingerprint: str) -> list[TileLevel]:
    """The tile config as rows from the outermost level in; fields we do not know come last as-is."""
    cuda = target_fingerprint.startswith("cuda")
    rows = [TileLevel(cuda_level if cuda else cpu_level, name, _values(tile_config[name]), meaning)
            for name, cpu_level, cuda_level, meaning in LEVELS if name in tile_config]
    known = {name for name, *_ in LEVELS}
    rows += [TileLevel("", name, _values(value), "") for name, value in sorted(tile_config.items())
             if name not in known]
    return rows
