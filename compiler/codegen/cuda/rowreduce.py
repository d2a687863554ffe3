"""The CUDA row-reduction kernel: reductions whose innermost reduce axis is contiguous.

Softmax's max and sum stages, layer norm's mean and variance, ReduceSum/Max/Mean
over trailing axes: each output row is reduced by a team of `per_row` threads
(a multiple of the warp) striding over the flattened reduce space, so a warp
reads consecutive elements. Partial results combine with warp shuffles, then
across the team's warps through shared memory; lane 0 applies `post` and
stores. Every thread reaches every shuffle and barrier (rows past the end just
carry the identity), so the block stays convergent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.codegen import cexpr
from compiler.codegen.cuda.expr import emit, value_ctype
from compiler.codegen.cuda.parts import (
    MAX_GRID,
    MAX_THREADS,
    WARP,
    ceil_div,
    combine,
    decompose,
    epilogue,
    identity,
    linear,
    pow2_at_least,
    pow2_at_most,
    signature,
    team_reduce,
)
from compiler.ir.te import Compute, Load, Var, walk
from compiler.schedule.plan import TileConfig

MIN_REDUCE = WARP  # shorter rows leave most of a warp idle: the general kernel does better
ELEMS_PER_THREAD = 8  # enough loads in flight per thread before adding threads


@dataclass(frozen=True)
class RowGeometry:
    """Threads per output row (a power-of-two multiple of 32) and rows per block."""

    per_row: int
    rows: int

    @property
    def threads(self) -> int:
        return self.per_row * self.rows


def is_row_reduction(c: Compute) -> bool:
    """A long reduction whose last reduce axis indexes some load's innermost dimension."""
    if not c.is_reduction or math.prod(a.extent for a in c.reduce_axes) < MIN_REDUCE:
        return False
    last = c.reduce_axes[-1].name
    spatial = {a.name for a in c.axes}
    for ld in (x for x in walk(c.body) if isinstance(x, Load)):
        if ld.indices:
            inner = {v.name for v in walk(ld.indices[-1]) if isinstance(v, Var)}
            if last in inner and not inner & spatial:
                return True
    return False


def row_geometry(c: Compute, tile: TileConfig) -> RowGeometry:
    """Threads per row from the reduce length; rows per block from the TileConfig's block,
    kept between 128 and 1024 threads per block."""
    length = math.prod(a.extent for a in c.reduce_axes)
    per_row = min(MAX_THREADS, max(WARP, pow2_at_least(ceil_div(length, ELEMS_PER_THREAD))))
    rows_out = max(1, math.prod(a.extent for a in c.axes))
    wanted = pow2_at_most(max(1, math.prod(tile.block)))
    rows = max(max(1, 128 // per_row), min(wanted, MAX_THREADS // per_row))
    rows = min(rows, pow2_at_least(rows_out))
    return RowGeometry(per_row, rows)


def row_launch(c: Compute, g: RowGeometry) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    rows_out = max(1, math.prod(a.extent for a in c.axes))
    return (max(1, min(ceil_div(rows_out, g.rows), MAX_GRID)), 1, 1), (g.threads, 1, 1)


def render_rowreduce(c: Compute, g: RowGeometry, symbol: str) -> str:
    """CUDA source of the row-reduction kernel for `c`."""
    acc_t = value_ctype(c.acc_dtype)
    counter = cexpr.new_counter()
    rows_out = max(1, math.prod(a.extent for a in c.axes))
    length = math.prod(a.extent for a in c.reduce_axes)
    warps = g.per_row // WARP
    spatial = [f"s{d}" for d in range(len(c.axes))]
    ind, inner = "    ", "      "
    lines = [signature(c, symbol, g.threads) + " {"]
    if warps > 1:
        lines.append(f"  __shared__ {acc_t} part[{g.rows}][{warps}];")
    lines += [
        f"  const int tr = threadIdx.x % {g.per_row};",
        f"  const int rib = threadIdx.x / {g.per_row};",
        "  const int lane = threadIdx.x % 32;",
        f"  for (long long rb = blockIdx.x; rb < {ceil_div(rows_out, g.rows)}LL; rb += gridDim.x) {{",
        f"{ind}const long long row = rb * {g.rows} + rib;",
    ]
    lines += decompose("row", spatial, [a.extent for a in c.axes], ind)
    lines += [
        f"{ind}{acc_t} acc = {identity(c)};",
        f"{ind}if (row < {rows_out}LL) {{",
        f"{ind}  for (long long r = tr; r < {length}LL; r += {g.per_row}) {{",
    ]
    reduce_names = [f"k{d}" for d in range(len(c.reduce_axes))]
    lines += decompose("r", reduce_names, [a.extent for a in c.reduce_axes], inner)
    names = {a.name: s for a, s in zip(c.axes, spatial, strict=True)}
    names |= {a.name: k for a, k in zip(c.reduce_axes, reduce_names, strict=True)}
    value = emit(c.inputs, names, counter, c.body, lines, inner)
    lines += [f"{inner}acc = {combine(c, 'acc', value)};", f"{ind}  }}", f"{ind}}}"]
    lines += team_reduce(c, warps, "part[rib]", "tr / 32", "lane", ind)
    lines.append(f"{ind}if (tr == 0 && row < {rows_out}LL) {{")
    lines += epilogue(c, "acc", names, linear(spatial, c.shape), counter, ind + "  ")
    lines += [f"{ind}}}", "  }", "}", ""]
    return "\n".join(lines)
