"""Merging adjacent axes (spatial, or reduce) that every tensor walks as one contiguous run.

Two neighbouring output axes a, b (a outer) can become one axis of extent
|a| * |b| when every load that uses them indexes two neighbouring dimensions
of exactly those extents with the bare variables `a, b`: row-major storage
makes `a * |b| + b` the same offset, and the output is row-major too. The
kernel ABI passes pointers only, so the merged Compute reads and writes the
same memory. A 1x1 convolution's (h, w) thus becomes one GEMM column index
whose operand rows and output rows are contiguous, which packs and stores
with plain vector copies instead of per-element index arithmetic. Reduce axes
merge by the same rule (only the loads' indices and shapes change).
"""

from __future__ import annotations

import dataclasses

from compiler.ir.te import (
    INDEX,
    Compute,
    Expr,
    Load,
    TensorType,
    Var,
    children,
    const,
    rename_vars,
    substitute,
    walk,
)
from compiler.schedule.plan import TileConfig


def merge_axes(c: Compute, tile: TileConfig) -> tuple[Compute, TileConfig]:
    """`c` with every mergeable pair of neighbouring spatial axes merged, and `tile` to match
    (the merged axis' block and thread tiles are the products of the pair's). Reduce axes
    of extent 1 (a 1x1 kernel's) are dropped first: their index terms are zero."""
    c, tile = _drop_unit_reduce_axes(c, tile)
    return _merge_all(c, tile, "axes")


def merge_reduce_axes(c: Compute, tile: TileConfig) -> tuple[Compute, TileConfig]:
    """`c` with every mergeable pair of neighbouring reduce axes merged (the merged axis'
    reduce step the product of the pair's): a reduction over a feature map's (h, w), such
    as GlobalAveragePool, becomes one contiguous row that the row-reduction loop vectorizes."""
    return _merge_all(c, tile, "reduce_axes")


def _merge_all(c: Compute, tile: TileConfig, kind: str) -> tuple[Compute, TileConfig]:
    d = 0
    while d + 1 < len(getattr(c, kind)):
        positions = _merge_positions(c, d, kind)
        if positions is None:
            d += 1
            continue
        c, tile = _merge(c, tile, d, positions, kind)
    return c, tile


def _drop_unit_reduce_axes(c: Compute, tile: TileConfig) -> tuple[Compute, TileConfig]:
    keep = [k for k, a in enumerate(c.reduce_axes) if a.extent > 1]
    if not keep or len(keep) == len(c.reduce_axes):
        return c, tile
    zero = {a.name: const(0, INDEX) for a in c.reduce_axes if a.extent == 1}
    compute = dataclasses.replace(c, body=rename_vars(c.body, zero),
                                  reduce_axes=tuple(c.reduce_axes[k] for k in keep))
    return compute, dataclasses.replace(tile, reduce_step=tuple(tile.reduce_step[k] for k in keep))


def _loads(c: Compute) -> list[Load]:
    exprs = [c.body] if c.post is None else [c.body, c.post]
    return [x for e in exprs for x in walk(e) if isinstance(x, Load)]


def _merge_positions(c: Compute, d: int, kind: str) -> dict[int, int] | None:
    """Per input using axes d, d+1 (of `kind`: "axes" or "reduce_axes"): the dimension where
    they index it, or None if not mergeable."""
    a, b = getattr(c, kind)[d], getattr(c, kind)[d + 1]
    if {a.name, b.name} & _bare_vars(c):
        return None  # an axis used as a value (a scatter's update position) keeps its own variable
    positions: dict[int, int] = {}
    used: set[int] = set()
    for ld in _loads(c):
        uses = [i for i, x in enumerate(ld.indices)
                if any(isinstance(v, Var) and v.name in (a.name, b.name) for v in walk(x))]
        if uses:
            used.add(ld.input)
        shape = c.inputs[ld.input].shape
        i = uses[0] if uses else -1
        fits = (uses == [i, i + 1] and _is_var(ld.indices[i], a.name) and _is_var(ld.indices[i + 1], b.name)
                and shape[i] == a.extent and shape[i + 1] == b.extent)
        if uses and not fits:
            return None
        if positions.setdefault(ld.input, i) != i:
            return None  # one tensor indexed two ways: its shape cannot merge for both
    return {k: i for k, i in positions.items() if k in used}


def _bare_vars(c: Compute) -> set[str]:
    """Names of the variables used outside load indices, in the body or post."""
    names: set[str] = set()
    stack = [c.body] if c.post is None else [c.body, c.post]
    while stack:
        x = stack.pop()
        if isinstance(x, Var):
            names.add(x.name)
        elif not isinstance(x, Load):
            stack.extend(children(x))
    return names


def _is_var(e: Expr, name: str) -> bool:
    return isinstance(e, Var) and e.name == name


def _merge(c: Compute, tile: TileConfig, d: int, positions: dict[int, int],
           kind: str) -> tuple[Compute, TileConfig]:
    a, b = getattr(c, kind)[d], getattr(c, kind)[d + 1]

    def merged(ld: Expr) -> Expr | None:
        if not isinstance(ld, Load) or ld.input not in positions:
            return None
        i = positions[ld.input]
        return dataclasses.replace(ld, indices=(*ld.indices[:i], ld.indices[i], *ld.indices[i + 2:]))

    inputs = tuple(
        TensorType((*t.shape[:i], t.shape[i] * t.shape[i + 1], *t.shape[i + 2:]), t.dtype)
        if (i := positions.get(k)) is not None else t for k, t in enumerate(c.inputs))
    old = getattr(c, kind)
    axes = (*old[:d], dataclasses.replace(a, extent=a.extent * b.extent), *old[d + 2:])
    post = None if c.post is None else substitute(c.post, merged)
    compute = dataclasses.replace(c, body=substitute(c.body, merged), inputs=inputs, post=post, **{kind: axes})

    def pair(sizes: tuple[int, ...]) -> tuple[int, ...]:
        return (*sizes[:d], sizes[d] * sizes[d + 1], *sizes[d + 2:])
    if kind == "reduce_axes":
        return compute, dataclasses.replace(tile, reduce_step=pair(tile.reduce_step))
    return compute, dataclasses.replace(tile, block=pair(tile.block), thread=pair(tile.thread))
