"""CPU kernel of a softmax over the last axis: one row at a time, three passes in L1.

The fused row group of a Softmax (max, exp(x - max), 1 / sum, multiply: see
compiler/frontend/ops/normalization.py) runs well as members on blocks of rows
(c/rows.py), but a softmax spends 85% of its time in exp, and the general members
pay for what they cannot know: a NaN-propagating max (four operations a vector),
exp's full range check, and the exponentials kept in scratch and summed in a pass
of their own. This writer knows the group, so per row it takes
  1. the max with maxps (a NaN is dropped here, but it comes back: exp(NaN - m) is
     NaN, so the sum and then every output of its row are NaN, as before),
  2. exp(x - max) straight into the output row, summed as it is written, with the
     exp for arguments <= 0 (one compare of range check instead of two operations),
  3. the row scaled in place by 1 / sum, while it is still in L1.
Measured against the row-group members on the 128x768 softmax (1 thread, one
process, interleaved): -10% from the structure, -5% more from the exp.
"""

from __future__ import annotations

import math

from compiler.codegen.c.team import mark_used, shared_tasks
from compiler.codegen.c.vector import VECTOR_TYPE, lane_rotations, splat, vector_typedefs
from compiler.codegen.c.vector_math import (
    exp_definitions,
    exp_function,
    max_definitions,
    max_function,
)
from compiler.codegen.csource import CSource
from compiler.ir.te import Compute

# Vectors in flight per pass: enough independent chains to hide maxps and exp latency.
_MAX_CHAINS = 4
_EXP_CHAINS = 2


def render_row_softmax(c: Compute, block: int, lanes: int, src: CSource, symbol: str, params: list[str],
                       header: str, parallel: bool) -> None:
    """Write `symbol`'s row function and team function `header` for row softmax `c`
    (the plan chose this path: `TileConfig.row_softmax`, compiler/schedule/row_softmax.py): tasks of `block` rows, `lanes`-wide float32 vectors."""
    width, rows = c.shape[-1], math.prod(c.shape[:-1])
    src.define({**exp_definitions(lanes), **max_definitions(lanes)})
    with src.block(f"static void {symbol}_row(float* restrict y, const float* restrict x)"):
        src.extend(vector_typedefs("float32", lanes))
        _row_max(src, width, lanes)
        _row_exp_sum(src, width, lanes)
        src.line("const float inv = 1.0f / sum;")
        src.line("j = 0;")
        with src.block(f"for (; j + {lanes}L <= {width}L; j += {lanes}L)"):
            src.line(f"*({VECTOR_TYPE}*)(y + j) = *({VECTOR_TYPE}*)(y + j) * inv;")
        src.line(f"for (; j < {width}L; ++j) y[j] *= inv;")
    block = max(1, min(block, rows))
    tasks = -(-rows // block)
    with src.block(header):
        mark_used(src, params)
        with shared_tasks(src, parallel and tasks > 1), src.block(f"for (int64_t t = 0; t < {tasks}L; ++t)"):
            src.line(f"const int64_t end = t * {block}L + {block}L < {rows}L ? t * {block}L + {block}L : {rows}L;")
            with src.block(f"for (int64_t r = t * {block}L; r < end; ++r)"):
                src.line(f"{symbol}_row(out + r * {width}L, in0 + r * {width}L);")


def _row_max(src: CSource, width: int, lanes: int) -> None:
    """`float top`: the row's max, NaN ignored (see the module docstring)."""
    vmax = max_function(lanes)
    chains = [f"m{k}" for k in range(_MAX_CHAINS)]
    src.line(_declare(chains, splat("-INFINITY", lanes)))
    src.line("int64_t j = 0;")
    step = _MAX_CHAINS * lanes
    with src.block(f"for (; j + {step}L <= {width}L; j += {step}L)"):
        src.extend([f"{m} = {vmax}(*(const {VECTOR_TYPE}*)(x + j + {k * lanes}L), {m});" for k, m in enumerate(chains)])
    with src.block(f"for (; j + {lanes}L <= {width}L; j += {lanes}L)"):
        src.line(f"m0 = {vmax}(*(const {VECTOR_TYPE}*)(x + j), m0);")
    folded = chains[0]
    for m in chains[1:]:
        folded = f"{vmax}({folded}, {m})"
    src.line(f"m0 = {folded};")
    src.extend([f"m0 = {vmax}(m0, {rotated});" for rotated in lane_rotations("m0", lanes)])
    src.line("float top = m0[0];")
    src.line(f"for (; j < {width}L; ++j) top = x[j] > top ? x[j] : top;")


def _row_exp_sum(src: CSource, width: int, lanes: int) -> None:
    """exp(x - top) into y, and `float sum` of it."""
    vexp = exp_function(lanes, nonpositive=True)
    chains = [f"s{k}" for k in range(_EXP_CHAINS)]
    src.line(_declare(chains, splat("0.0f", lanes)))
    src.line("j = 0;")
    step = _EXP_CHAINS * lanes
    with src.block(f"for (; j + {step}L <= {width}L; j += {step}L)"):
        for k, s in enumerate(chains):
            src.line(f"const {VECTOR_TYPE} e{k} = {vexp}(*(const {VECTOR_TYPE}*)(x + j + {k * lanes}L) - top);")
            src.line(f"*({VECTOR_TYPE}*)(y + j + {k * lanes}L) = e{k};")
            src.line(f"{s} = {s} + e{k};")
    with src.block(f"for (; j + {lanes}L <= {width}L; j += {lanes}L)"):
        src.line(f"const {VECTOR_TYPE} e = {vexp}(*(const {VECTOR_TYPE}*)(x + j) - top);")
        src.line(f"*({VECTOR_TYPE}*)(y + j) = e;")
        src.line("s0 = s0 + e;")
    src.line(f"s0 = {' + '.join(chains)};")
    src.extend([f"s0 = s0 + {rotated};" for rotated in lane_rotations("s0", lanes)])
    src.line("float sum = s0[0];")
    with src.block(f"for (; j < {width}L; ++j)"):
        src.line("const float e = expf(x[j] - top);")
        src.line("y[j] = e;")
        src.line("sum += e;")


def _declare(names: list[str], value: str) -> str:
    return f"{VECTOR_TYPE} {', '.join(f'{n} = {value}' for n in names)};"
