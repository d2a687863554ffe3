"""Which path a CPU row group takes: a group that is exactly a last-axis float32 softmax
runs compiler/codegen/c/softmax.py's row kernel (three passes over each row in L1, its
exp specialised to arguments <= 0) instead of the general members on blocks of rows
(compiler/codegen/c/rows.py); decided when the plan is built (`TileConfig.row_softmax`).
"""

from __future__ import annotations

import math

from compiler.ir.rows import group_sharing
from compiler.ir.te import ACC, Call, Compute, Const, Expr, Load, Var


def is_row_softmax(c: Compute) -> bool:
    """Whether group `c` is exactly a float32 softmax over its last axis (as the frontend
    lowers Softmax), reading one group input: what the row kernel (compiler/codegen/c/softmax.py) computes."""
    if c.dtype != "float32" or len(c.stages) != 3 or len(c.inputs) != 1 or math.prod(c.shape) == 0:
        return False
    if c.inputs[0].shape != c.shape or c.inputs[0].dtype != "float32" or group_sharing(c).rows != len(c.shape) - 1:
        return False
    top, exps, inv = c.stages
    if not (top.reduce_op == "max" and inv.reduce_op == "sum" and len(top.reduce_axes) == len(inv.reduce_axes) == 1):
        return False
    rows = [Var(a.name) for a in c.axes[:-1]]
    i = [Var(a.name) for a in c.axes]

    def row_load(stage: Compute, source: int) -> Load:  # a reduction's load of one row
        return Load(source, (*(Var(a.name) for a in stage.axes), Var(stage.reduce_axes[0].name)), "float32")

    at = [Var(a.name) for a in exps.axes]
    expected: list[tuple[Expr | None, Expr | None]] = [
        (top.body, row_load(top, 0)), (top.post, None),
        (exps.body, Call("exp", (Call("sub", (Load(0, tuple(at), "float32"),
                                              Load(1, tuple(at[:-1]), "float32")), "float32"),), "float32")),
        (inv.body, row_load(inv, 2)),
        (inv.post, Call("div", (Const(1.0, "float32"), Var(ACC, "float32")), "float32")),
        (c.body, Call("mul", (Load(2, tuple(i), "float32"), Load(3, tuple(rows), "float32")), "float32")),
        (c.post, None),
    ]
    return exps.reduce_op is None and all(got == want for got, want in expected)
