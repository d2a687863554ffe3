"""Rows shared by the members of a fused group (a Compute with stages).

A group can run block of rows by block of rows when all its members share their
leading axes, the rows: every member's shape starts with them, every load of a
stage's output or of a row-indexed input reads its leading dimensions at exactly
the reader's own row axes (the other indices free of them), and every other
input is read independently of the rows (whole, by every block). The fusion
pass (compiler/schedule/tilegraph/rows.py) and the CPU renderer (compiler/codegen/
c/rows.py) both ask `row_sharing`, so they always agree on the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from compiler.ir.contraction import expr_vars
from compiler.ir.dtypes import dtype
from compiler.ir.te import Axis, Compute, Const, Expr, TensorType, Var, loads_of


@dataclass(frozen=True)
class RowSharing:
    """`rows` leading axes are shared; `by_rows[k]` says whether `member_inputs()[k]` is
    read block by block (True) or whole (False)."""

    rows: int
    by_rows: tuple[bool, ...]


def row_sharing(c: Compute) -> RowSharing | None:
    """The most leading axes the members of group `c` share as rows (None: none)."""
    members = c.members()
    shapes = [m.shape for m in members]
    common = 0
    while all(len(s) > common for s in shapes) and len({s[common] for s in shapes}) == 1:
        common += 1
    for g in range(common, 0, -1):
        by_rows = _by_rows(c, g)
        if by_rows is not None:
            return RowSharing(g, by_rows)
    return None


def group_sharing(c: Compute) -> RowSharing:
    """The rows fused group `c` shares (a group without them is a compiler bug)."""
    sharing = row_sharing(c)
    if sharing is None:
        raise ValueError("fused group whose members share no rows")
    return sharing


def _by_rows(c: Compute, g: int) -> tuple[bool, ...] | None:
    tensors = c.member_inputs()
    rows = c.shape[:g]
    seen: dict[int, bool] = {}  # input position -> read by rows (True) or whole (False), never both
    for m in c.members():
        row_vars = {m.axes[d].name for d in range(g)}
        for ld in loads_of(m):
            by_rows = (len(ld.indices) >= g and tensors[ld.input].shape[:g] == rows
                       and all(_at_row(ix, m.axes[d]) for d, ix in enumerate(ld.indices[:g]))
                       and not any(expr_vars(ix) & row_vars for ix in ld.indices[g:]))
            whole = not any(expr_vars(ix) & row_vars for ix in ld.indices)
            stage_output = ld.input >= len(c.inputs)
            if not (by_rows or (whole and not stage_output)) or seen.setdefault(ld.input, by_rows) != by_rows:
                return None
    return tuple(seen.get(k, False) for k in range(len(tensors)))


def _at_row(ix: Expr, axis: Axis) -> bool:
    """Whether index `ix` reads row axis `axis` at the reader's own row: its variable, or 0
    on an axis of extent 1 (how a broadcast reads a dimension of 1; a [1, S, D] layer norm
    after an Add had only its unit batch axis as rows, one row for the whole tensor)."""
    return ix == Var(axis.name) or (axis.extent == 1 and isinstance(ix, Const) and ix.value == 0)


def row_bytes(group: Compute, sharing: RowSharing) -> int:
    """Bytes of one row of everything the group reads or writes by rows (a block's
    working set per row)."""
    g = sharing.rows
    tensors = [t for t, by in zip(group.member_inputs(), sharing.by_rows, strict=True) if by]
    return sum(math.prod(t.shape[g:]) * dtype(t.dtype).nbytes for t in (*tensors, group))


def row_elems(t: Compute | TensorType, g: int) -> int:
    """Elements of one row of `t` (its dimensions after the `g` row axes)."""
    return math.prod(t.shape[g:])


def stage_row_bytes(group: Compute, sharing: RowSharing) -> int:
    """Bytes of one row of the group's stages (what a kernel keeps on chip per row)."""
    return sum(row_elems(s, sharing.rows) * dtype(s.dtype).nbytes for s in group.stages)


def cut_to_rows(m: Compute, g: int, n: int, sharing: RowSharing) -> Compute:
    """Member `m` over one block of `n` rows: row extents (1, ..., 1, n), and so the
    leading dimensions of every input it reads by rows."""
    rows = (1,) * (g - 1) + (n,)
    axes = tuple(Axis(a.name, rows[d]) if d < g else a for d, a in enumerate(m.axes))
    inputs = tuple(TensorType((*rows, *t.shape[g:]), t.dtype) if sharing.by_rows[p] else t
                   for p, t in enumerate(m.inputs))
    return replace(m, axes=axes, inputs=inputs)


def block_rows(c: Compute, block: int) -> list[int]:
    """Rows of the innermost row axis in the task blocks of group `c` (`block` per task,
    clipped to the extent): the full block, then a shorter last one where it leaves a rest.
    Each gets its own copy of the members' code."""
    extent = c.shape[group_sharing(c).rows - 1]
    block = max(1, min(block, extent))
    return [block] + ([extent % block] if extent % block else [])
