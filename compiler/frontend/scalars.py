"""One-element constants read by a Compute become literals in its body.

A Clip's bounds (inputs since opset 11), an RMSNorm's epsilon or an attention scale is a
weight tensor of one element; read through a pointer, the C compiler must reload it after
every store (the output may alias it) and cannot fold it into the operation, and the
fused kernel carries one more argument (a ReLU6 epilogue, Clip 0, 6 as inputs, reloaded
both bounds before every vector store of mobilenet_v2's convolutions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from compiler.frontend.values import Value
from compiler.ir.te import Compute, Expr, Load, const, loads_of, substitute


def _literal(v: Value) -> object | None:
    """The value of a one-element constant, else None."""
    return v.array.reshape(()).item() if v.array is not None and v.array.size == 1 else None


def inline_scalar_constants(compute: Compute, inputs: Sequence[Value]) -> tuple[Compute, list[Value]]:
    """`compute` with every unpadded load of a one-element constant input replaced by its
    literal, and the inputs it still reads (renumbered); unchanged when nothing would remain
    to read (the builder folds such a Compute, or it is too big to fold) or when it
    is a fused group (its stages read the inputs by position too)."""
    padded = {ld.input for ld in loads_of(compute) if ld.pad is not None}
    scalars = {i: _literal(v) for i, v in enumerate(inputs) if i not in padded and _literal(v) is not None}
    if not scalars or len(scalars) == len(inputs) or compute.stages:
        return compute, list(inputs)
    kept = [i for i in range(len(inputs)) if i not in scalars]
    slot = {old: new for new, old in enumerate(kept)}

    def fn(e: Expr) -> Expr | None:
        if not isinstance(e, Load):
            return None
        if e.input in scalars:
            return const(scalars[e.input], e.dtype)  # type: ignore[arg-type]
        return Load(slot[e.input], tuple(substitute(i, fn) for i in e.indices), e.dtype, e.pad)

    post = None if compute.post is None else substitute(compute.post, fn)
    return (dataclasses.replace(compute, body=substitute(compute.body, fn), post=post,
                                inputs=tuple(compute.inputs[i] for i in kept)),
            [inputs[i] for i in kept])
