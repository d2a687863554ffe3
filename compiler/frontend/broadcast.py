"""Numpy-style (multidirectional) broadcasting: the one mechanism every lowering uses."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.errors import ModelError
from compiler.ir.dtypes import INDEX
from compiler.ir.te import Const, Expr


def broadcast_shape(shapes: Sequence[Sequence[int]], what: str = "operands") -> tuple[int, ...]:
    """The shape all `shapes` broadcast to; ModelError when they are incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        dims = {s[len(s) - rank + d] for s in shapes if len(s) - rank + d >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ModelError(f"{what}: shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_index(in_shape: Sequence[int], out_index: Sequence[Expr]) -> tuple[Expr, ...]:
    """Index into a tensor of `in_shape` for output element `out_index` (trailing-aligned).

    A dim of extent 1 is read at 0 whatever the output index.
    """
    lead = len(out_index) - len(in_shape)
    if lead < 0:
        raise ValueError(f"cannot broadcast rank {len(in_shape)} to rank {len(out_index)}")
    return tuple(
        Const(0, INDEX) if n == 1 else out_index[lead + d] for d, n in enumerate(in_shape)
    )
