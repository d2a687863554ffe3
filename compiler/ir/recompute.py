"""Stages of a fused group recomputed where they are read instead of kept.

A row group keeps every stage's row on chip for the members after it (a GPU: in shared
memory). An element-wise stage need not be kept: each reader can evaluate its body at
the indices it reads (softmax's exponentials, once for the sum and once for the
scaling), trading a little arithmetic for the stage's space, so rows longer than the
space still run as one kernel. This is register-level inlining (compiler/schedule/
tilegraph/registers.py) inside a group; the stages recomputed are then read by no member.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from compiler.ir.te import Compute, Expr, Load, rename_vars, substitute


def recomputable(c: Compute) -> tuple[int, ...]:
    """Positions of the stages of group `c` that readers can recompute: element-wise ones
    whose body is of the stored type (nothing is rounded on the way through memory)."""
    return tuple(k for k, s in enumerate(c.stages)
                 if not s.is_reduction and s.post is None and s.body.dtype == s.dtype)


def recompute(c: Compute, stages: Collection[int]) -> Compute:
    """Group `c` with every read of the given (recomputable) stages replaced by the stage's
    body at the read's indices; a recomputed stage reading an earlier one reads its body."""
    base = len(c.inputs)
    bodies: dict[int, tuple[list[str], Expr]] = {}  # slot -> the stage's axes and body

    def inline(e: Expr) -> Expr:
        def fn(x: Expr) -> Expr | None:
            if isinstance(x, Load) and x.input in bodies:
                names, body = bodies[x.input]
                return rename_vars(body, dict(zip(names, x.indices, strict=True)))
            return None

        return substitute(e, fn)

    members = []
    for k, m in enumerate(c.members()):
        m = replace(m, body=inline(m.body), post=None if m.post is None else inline(m.post))
        if k in stages:
            bodies[base + k] = ([a.name for a in m.axes], m.body)
        members.append(m)
    return replace(members[-1], stages=tuple(members[:-1]), inputs=c.inputs)
