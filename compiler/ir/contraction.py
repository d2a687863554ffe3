"""Contractions seen as GEMMs, for every target: which Computes qualify and how.

Matmul, batched matmul and convolution (as implicit GEMM) all have the form
`out[s] = post(sum_k x[..] * y[..])`. Spatial axes read by only one operand
become that operand's side (rows or cols), axes read by both (or neither)
are batch axes; the reduce axes flatten to K. The side holding the output's
innermost axis is the cols side: CUDA maps it to the fast thread index (stores
coalesce), the CPU to the SIMD lanes of its micro-kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from compiler.ir.te import ACC, Call, Compute, Const, Expr, Load, Var, call, rename_vars, walk

_GEMM_DTYPES = {"float32", "float64", "int32", "int64"}


@dataclass(frozen=True)
class Contraction:
    """A Compute seen as a GEMM: the operand expressions and the axes of each side."""

    lhs: Expr  # indexed by the rows side
    rhs: Expr  # indexed by the cols side (holds the output's innermost axis)
    batch: tuple[int, ...]  # spatial axis positions
    rows: tuple[int, ...]
    cols: tuple[int, ...]


def expr_vars(e: Expr) -> set[str]:
    """Names of the variables in `e`."""
    return {x.name for x in walk(e) if isinstance(x, Var)}


def plain_load(e: Expr) -> Load | None:
    """The load under any casts, if the operand is one load with load-free indices."""
    while isinstance(e, Call) and e.op == "cast":
        e = e.args[0]
    if not isinstance(e, Load):
        return None
    if any(isinstance(x, Load) for i in e.indices for x in walk(i)):
        return None
    return e


def match_contraction(c: Compute) -> Contraction | None:
    """The Compute as a contraction, or None when it is not `sum(x * y)` with two sides."""
    if c.reduce_op != "sum" or not c.reduce_axes or c.acc_dtype not in _GEMM_DTYPES:
        return None
    body = c.body
    if not (isinstance(body, Call) and body.op == "mul"):
        return None
    x, y = body.args
    if plain_load(x) is None or plain_load(y) is None:
        return None
    vx, vy = expr_vars(x), expr_vars(y)
    rows = tuple(d for d, a in enumerate(c.axes) if a.name in vx and a.name not in vy)
    cols = tuple(d for d, a in enumerate(c.axes) if a.name in vy and a.name not in vx)
    if not rows or not cols:
        return None
    batch = tuple(d for d in range(len(c.axes)) if d not in rows and d not in cols)
    if len(c.axes) - 1 in rows:  # the output's innermost axis goes to the cols side
        return Contraction(y, x, batch, cols, rows)
    return Contraction(x, y, batch, rows, cols)


def side_extent(c: Compute, axes: tuple[int, ...]) -> int:
    """Number of index points of the given spatial axes (a GEMM side's flattened length)."""
    return math.prod(c.axes[d].extent for d in axes)


def scaled_sum(c: Compute, scale: float) -> Compute:
    """Contraction `c` as if one of its operands were multiplied by `scale`: sum(scale * x
    * y) = scale * sum(x * y), so its epilogue reads the sum scaled."""
    scaled = call("mul", Var(ACC, c.acc_dtype), Const(scale, c.acc_dtype))
    return replace(c, post=scaled if c.post is None else rename_vars(c.post, {ACC: scaled}))
