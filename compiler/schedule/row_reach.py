"""The rows of a convolution's input read in place that a task reads: where the tasks of
a GEMM split only the positions read in place (compiler/schedule/in_place.py lays them
out), each task can copy the input rows its windows reach into its own thread's scratch
(compiler/codegen/c/direct.py `write_task_copy`) instead of the team copying the whole
input and waiting for it."""

from __future__ import annotations

from dataclasses import dataclass

from compiler.ir.affine import linear_form
from compiler.ir.te import Compute, Load
from compiler.schedule.gemm_blocking import DirectOperand


@dataclass(frozen=True)
class RowReach:
    """The rows of `pad` a run of positions reads, where the walked axes outside a line move
    one dimension of the box only, the one above the lines (`dim`): a convolution's input
    rows. Position values v of the walked axes read row `first + sum(coef * v[axis])`
    (`coefs`: (axis position, coef) pairs), plus `low` .. `high` rows over the reduce taps."""

    dim: int
    first: int
    coefs: tuple[tuple[int, int], ...]
    low: int
    high: int


def row_reach(c: Compute, load: Load, d: DirectOperand) -> RowReach | None:
    """Where the copy of `d` can be split by rows among the tasks that split its positions:
    the box's lines hold the positions of one output row (or plane), and the walked axes
    outside a line move only the dimension above them. None: a batch axis moves the patches
    (a grouped convolution's groups), the box has no dimension above its lines, or a walked
    axis moves another one (a batch of images walked in one side)."""
    if not d.copied or d.batch or len(d.extents) < 2:
        return None
    affine = [linear_form(i) for i in load.indices]
    forms = [f for f in affine if f is not None]
    if len(forms) < len(affine):
        return None
    walked = [axis for axis, _, _ in d.outer] + ([d.fold[0]] if d.fold is not None else [])
    dim = len(forms) - 2
    names = {c.axes[a].name: a for a in walked if c.axes[a].extent > 1}
    if c.axes[d.inner].name in forms[dim][1]:
        return None
    if any(k != dim and any(v in names for v in form[1]) for k, form in enumerate(forms)):
        return None
    const, coefs = forms[dim]
    reduce_names = {a.name: a.extent for a in c.reduce_axes}
    moved = tuple((names[v], k) for v, k in coefs.items() if v in names)
    if not moved:
        return None
    taps = [(k * (reduce_names[v] - 1)) for v, k in coefs.items() if v in reduce_names]
    return RowReach(dim, const - d.lo[dim], moved, sum(min(0, t) for t in taps), sum(max(0, t) for t in taps))
