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


# The decisions the backend's tile step adds below the rTile (compiler/schedule/plan.py
# TileConfig): (field, CPU memory level, CUDA memory level, what they are).
DECISIONS = (
    ("gemm", "registers, L1, L2", "", "the packed GEMM: micro-kernel (rows x columns), blocks, "
     "orientation, operand read in place, operands packed at load"),
    ("members", "registers (one task)", "", "a row group's member tiles, per block of rows"),
    ("launch", "", "thread block, grid", "kernel shape, its geometry and its launch"),
)


def _gemm(g: dict) -> str:
    mk = g.get("mk", {})
    parts = [f"micro-kernel {mk.get('rows')} \u00d7 {mk.get('vectors', 0) * mk.get('lanes', 0)}",
             f"mc {g.get('mc')} \u00b7 nc {g.get('nc')} \u00b7 kc {g.get('kc')}"]
    if g.get("swapped"):
        parts.append("sides swapped")
    if g.get("direct"):
        parts.append(f"{str(g['direct'].get('side', '')).upper()} read in place")
    packed = [str(p.get("side", "")).upper() for p in g.get("packed", ())]
    if packed:
        parts.append(f"packed at load: {', '.join(packed)}")
    return " \u00b7 ".join(parts)


def _members(blocks: list) -> str:
    return f"{len(blocks[0]) if blocks else 0} members, {len(blocks)} block size(s)"


def _launch(launch: dict) -> str:
    geometry = " \u00b7 ".join(f"{k} {_values(v)}" for k, v in launch.get("geometry", {}).items())
    return (f"{launch.get('kind')} \u00b7 grid {_values(launch.get('grid', []))} \u00b7 "
            f"block {_values(launch.get('block', []))} \u00b7 {geometry}")


_SUMMARIES = {"gemm": _gemm, "members": _members, "launch": _launch}


def tile_levels(tile_config: dict, target_fingerprint: str) -> list[TileLevel]:
    """The tile config as rows from the outermost level in, then the decisions below the
    rTile in a line each; fields we do not know come last as-is."""
    cuda = target_fingerprint.startswith("cuda")
    rows = [TileLevel(cuda_level if cuda else cpu_level, name, _values(tile_config[name]), meaning)
            for name, cpu_level, cuda_level, meaning in LEVELS if name in tile_config]
    rows += [TileLevel(cuda_level if cuda else cpu_level, name, _SUMMARIES[name](tile_config[name]), meaning)
             for name, cpu_level, cuda_level, meaning in DECISIONS if tile_config.get(name)]
    known = {name for name, *_ in (*LEVELS, *DECISIONS)}
    rows += [TileLevel("", name, _values(value), "") for name, value in sorted(tile_config.items())
             if name not in known]
    return rows
