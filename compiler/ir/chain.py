"""Rows of a feature map shared, with halos, by the members of a convolution chain.

A chain group (a Compute with stages, made by compiler/schedule/partition.py) runs
tile of output rows by tile of output rows: NCHW members of one batch, each reading
the ones before it at rows `s * i2 + d`, with `d` in a small window (a 1x1
convolution: d = 0; a 3x3 one with padding 1: -1..1) and `s` the read's row stride (1,
or 2 for a stride-2 convolution: its producer has twice its rows). Welder's tile
propagation is region inference backwards: a member computes the rows its readers'
windows need (its halo, scaled by the strides between it and the sink) beyond the
tile, recomputed by the neighbouring tile too. The partitioner, the CPU tile step and
the C renderer (compiler/codegen/c/chain.py) all ask this module, so they agree on
halos and on each task's cut of the members.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from compiler.ir.contraction import expr_vars
from compiler.ir.te import (
    Axis,
    Compute,
    Const,
    Expr,
    Load,
    TensorType,
    Var,
    interval_of,
    loads_of,
    substitute,
)

BATCH, CHANNEL, ROW = 0, 1, 2


@dataclass(frozen=True)
class Access:
    """How a chain's members read one tensor: by `rows` (at rows i2 + lo .. i2 + hi), one
    slice per `batch` index, or `whole`."""

    kind: str  # "rows" | "batch" | "whole"
    lo: int = 0
    hi: int = 0
    stride: int = 1  # "rows": the tensor's rows per row of the reader


@dataclass(frozen=True)
class ChainShape:
    """A chain's batch and (sink's) rows; each member input's access; each member's rows,
    scale (its rows per row of the sink: the product of the row strides between them) and
    halo (rows above and below the scaled tile it computes)."""

    batch: int
    rows: int
    access: tuple[dict[int, Access], ...]  # per member: member input position -> access
    halos: tuple[tuple[int, int], ...]
    member_rows: tuple[int, ...]
    scales: tuple[int, ...]

    @property
    def down_samples(self) -> bool:
        """Whether a member runs at more rows than the sink (a strided read between them)."""
        return max(self.scales) > 1


MAX_ROW_STRIDE = 2  # a stride-2 convolution or pooling; wider strides end a chain


def _row_offsets(m: Compute, ld: Load) -> tuple[int, int, int] | None:
    """(lo, hi, s) when `ld`'s row index is s times the member's row plus an offset in
    lo..hi, for a stride s of 1 to MAX_ROW_STRIDE."""
    env = {a.name: (0, a.extent - 1) for a in m.all_axes()}
    row = m.axes[ROW].name
    at0 = interval_of(ld.indices[ROW], {**env, row: (0, 0)})
    at5 = interval_of(ld.indices[ROW], {**env, row: (5, 5)})
    if at0 is None or at5 is None:
        return None
    moved = (at5[0] - at0[0], at5[1] - at0[1])
    if moved[0] != moved[1] or moved[0] % 5 or not 1 <= moved[0] // 5 <= MAX_ROW_STRIDE:
        return None
    return at0[0], at0[1], moved[0] // 5


def _access(m: Compute, ld: Load, t: TensorType, batch: int) -> Access | None:
    """How member `m` reads input `t` through `ld` (None: not as a chain can)."""
    b, r = m.axes[BATCH].name, m.axes[ROW].name
    if any(_depends(ix, r) for ix in ld.indices):
        if len(t.shape) != 4 or t.shape[BATCH] != batch:
            return None
        if ld.indices[BATCH] != Var(b) and not (batch == 1 and ld.indices[BATCH] == Const(0, "int64")):
            return None
        if any(_depends(ix, r) for d, ix in enumerate(ld.indices) if d != ROW):
            return None
        offsets = _row_offsets(m, ld)
        return None if offsets is None else Access("rows", *offsets)
    if batch > 1 and any(_depends(ix, b) for ix in ld.indices):
        if ld.indices[BATCH] != Var(b) or t.shape[BATCH] != batch:
            return None
        return None if any(_depends(ix, b) for ix in ld.indices[1:]) else Access("batch")
    return Access("whole")


def _depends(e: Expr, name: str) -> bool:
    return name in expr_vars(e)


def chain_shape(c: Compute, padded_inputs: bool = False) -> ChainShape | None:
    """The chain `c`'s members form, or None where they do not: every member NCHW of the
    sink's batch and dtype; stages read only by rows, each at one row stride (so each
    member has one scale); group inputs read by rows only without padding (a task points
    them at its member's first row, so a bounds check would see the wrong rows), unless
    `padded_inputs` (a chain still growing backwards, whose producers may yet join it)."""
    members = c.members()
    if any(len(m.axes) != 4 for m in members):
        return None
    batch = c.shape[BATCH]
    if any((m.shape[BATCH], m.dtype) != (batch, c.dtype) for m in members):
        return None
    groups = len(c.inputs)
    access: list[dict[int, Access]] = []
    for m in members:
        seen: dict[int, Access] = {}
        for ld in loads_of(m):
            a = _access(m, ld, m.inputs[ld.input], batch)
            stage = ld.input >= groups
            if a is None or (stage and a.kind != "rows") or (not stage and a.kind == "rows" and ld.pad is not None and not padded_inputs):
                return None
            prev = seen.get(ld.input)
            if prev is not None and (prev.kind, prev.stride) != (a.kind, a.stride):
                return None
            seen[ld.input] = a if prev is None else replace(a, lo=min(a.lo, prev.lo), hi=max(a.hi, prev.hi))
        access.append(seen)
    scales = _scales(access, groups)
    if scales is None:
        return None
    return ChainShape(batch, c.shape[ROW], tuple(access), _halos(access, groups),
                      tuple(m.shape[ROW] for m in members), scales)


def _scales(access: list[dict[int, Access]], groups: int) -> tuple[int, ...] | None:
    """Each member's rows per row of the sink, back from the sink through the row strides
    of its readers' reads (None: two readers disagree)."""
    scales: list[int | None] = [None] * (len(access) - 1) + [1]
    for j in range(len(access) - 1, -1, -1):
        for p, a in access[j].items():
            if p < groups:
                continue
            k, scale = p - groups, (scales[j] or 1) * a.stride
            if scales[k] not in (None, scale):
                return None
            scales[k] = scale
    return tuple(s or 1 for s in scales)


def _halos(access: list[dict[int, Access]], groups: int) -> tuple[tuple[int, int], ...]:
    """Rows above and below the (scaled) tile each member computes: its readers' windows,
    back from the sink (which computes the tile alone); a reader at row stride s needs s
    of the member's rows per row of its own halo."""
    halos = [(0, 0)] * len(access)
    for j in range(len(access) - 1, -1, -1):
        above, below = halos[j]
        for p, a in access[j].items():
            if p >= groups:
                k = p - groups
                halos[k] = (max(halos[k][0], a.stride * above - a.lo), max(halos[k][1], a.stride * below + a.hi))
    return tuple(halos)


@dataclass(frozen=True)
class Span:
    """Rows one member computes in a task: from `first` (relative to the tile's first row
    times the member's scale) `count` of them."""

    first: int
    count: int


def task_spans(shape: ChainShape, start: int, tile: int) -> tuple[tuple[Span, ...], int]:
    """Each member's rows in the task whose tile starts at row `start` (`tile` rows per
    task, fewer at the bottom), clipped to the image; and the tile's own rows."""
    n = min(tile, shape.rows - start)
    spans = []
    for (above, below), rows, scale in zip(shape.halos, shape.member_rows, shape.scales, strict=True):
        lo, hi = max(0, scale * start - above), min(rows, scale * (start + n - 1) + below + 1)
        spans.append(Span(lo - scale * start, hi - lo))
    return tuple(spans), n


def cut_member(c: Compute, shape: ChainShape, k: int, spans: tuple[Span, ...]) -> Compute:
    """Member `k` over one task's rows of one batch index: its rows cut to its span; a
    stage it reads declared as that stage's scratch (its span's rows) and read at rows
    shifted by the spans' firsts; a group input declared one batch index deep (the caller
    points it at the batch index and, read by rows, at the member's first row times the
    read's row stride: `input_row`)."""
    m = c.members()[k]
    groups = len(c.inputs)
    row = m.axes[ROW].name
    axes = tuple(Axis(a.name, 1 if d == BATCH else spans[k].count if d == ROW else a.extent)
                 for d, a in enumerate(m.axes))
    inputs = []
    for p, t in enumerate(m.inputs):
        if p >= groups:
            inputs.append(TensorType((1, t.shape[CHANNEL], spans[p - groups].count, t.shape[3]), t.dtype))
        elif p in shape.access[k] and shape.access[k][p].kind != "whole":
            inputs.append(TensorType((1, *t.shape[1:]), t.dtype))
        else:
            inputs.append(t)

    def at(e: Expr, offset: int) -> Expr:
        return substitute(e, lambda v: Var(row) + offset if v == Var(row) else None) if offset else e

    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Load) and x.input >= groups:
            first, stage_first = spans[k].first, spans[x.input - groups].first
            idx = tuple(substitute(i, fn) for i in x.indices)
            # the stage's local row read at this member's local row r: (the read at r + first)
            # - stage_first; at stride 1, one offset on the row variable says the same
            if shape.access[k][x.input].stride == 1:
                moved = at(idx[ROW], first - stage_first)
            else:
                moved = at(idx[ROW], first)
                moved = moved - stage_first if stage_first else moved
            return Load(x.input, (*idx[:ROW], moved, *idx[ROW + 1:]), x.dtype, x.pad)
        return None

    post = None if m.post is None else substitute(m.post, fn)
    return replace(m, axes=axes, inputs=tuple(inputs), body=substitute(m.body, fn), post=post)


def input_row(shape: ChainShape, k: int, p: int, first: int) -> tuple[int, int]:
    """Group input `p`, read by rows by member `k` whose span starts at `first`: the input's
    first row in a task is a * start + b (start: the tile's first row); (a, b)."""
    stride = shape.access[k][p].stride
    return stride * shape.scales[k], stride * first


@dataclass(frozen=True)
class TaskKind:
    """Tasks alike: each member's span and the tile's own rows."""

    spans: tuple[Span, ...]
    rows: int


def task_kinds(shape: ChainShape, tile: int) -> tuple[tuple[TaskKind, ...], tuple[int, ...]]:
    """The distinct kinds of the tiles of `tile` rows (first, interior, last tiles differ
    where halos meet the image's edges), and each tile's kind in order."""
    kinds: list[TaskKind] = []
    table = []
    for start in range(0, shape.rows, tile):
        kind = TaskKind(*task_spans(shape, start, tile))
        if kind not in kinds:
            kinds.append(kind)
        table.append(kinds.index(kind))
    return tuple(kinds), tuple(table)
