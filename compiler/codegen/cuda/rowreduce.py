"""The CUDA row-reduction kernel: reductions whose innermost reduce axis is contiguous.

Softmax's max and sum stages, layer norm's mean and variance, ReduceSum/Max/Mean
over trailing axes: each output row is reduced by a team of `per_row` threads
(a multiple of the warp) striding over the flattened reduce space, so a warp
reads consecutive elements. Partial results combine with warp shuffles, then
across the team's warps through shared memory; lane 0 applies `post` and
stores. Every thread reaches every shuffle and barrier (rows past the end just
carry the identity), so the block stays convergent. Which reductions take it, and
the team and block sizes, are the plan's (`RowGeometry`, compiler/schedule/cuda_tile.py).
"""

from __future__ import annotations

import math

from compiler.codegen import cexpr
from compiler.codegen.cuda.expr import emit, value_ctype
from compiler.codegen.cuda.parts import (
    combine,
    decompose,
    epilogue,
    identity,
    linear,
    signature,
    team_reduce,
)
from compiler.ir.te import Compute
from compiler.schedule.cuda_launch import WARP, RowGeometry, ceil_div


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
