"""Small builders for the Computes lowerings write: axes, loads, element-wise maps.

Axis names are deterministic ("i0".."iN" spatial, "r0".. reduce) so that equal
operators give equal canonical TE, which is what the kernel cache keys on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.frontend.broadcast import broadcast_index, broadcast_shape
from compiler.frontend.values import Value
from compiler.ir.dtypes import INDEX
from compiler.ir.te import Axis, Compute, Const, Expr, Load, TensorType, Var, call, const


def spatial_axes(shape: Sequence[int]) -> tuple[Axis, ...]:
    return tuple(Axis(f"i{d}", int(n)) for d, n in enumerate(shape))


def reduce_axes(extents: Sequence[int]) -> tuple[Axis, ...]:
    return tuple(Axis(f"r{d}", int(n)) for d, n in enumerate(extents))


def tensor_type(v: Value) -> TensorType:
    return TensorType(v.shape, v.dtype)


def load(i: int, v: Value, index: Sequence[Expr], pad: float | int | None = None) -> Load:
    """Element `index` of Compute input number `i`, which holds `v`."""
    return Load(i, tuple(index), v.dtype, pad)


def idx(n: int) -> Const:
    """An index literal."""
    return Const(int(n), INDEX)


def clamp(e: Expr, lo: int, hi: int) -> Expr:
    """`e` clamped to [lo, hi] (keeps a computed index in bounds)."""
    return call("min", call("max", e, idx(lo)), idx(hi))


def scalar(value: float | int | bool, like: Expr | str) -> Const:
    """A literal of the dtype of `like` (an expression or a dtype name)."""
    return const(value, like if isinstance(like, str) else like.dtype)


def compute(
    shape: Sequence[int],
    body: Expr,
    inputs: Sequence[Value],
    *,
    reduce: Sequence[int] = (),
    reduce_op: str | None = None,
    post: Expr | None = None,
    dtype: str | None = None,
) -> Compute:
    """A Compute over spatial axes i0.. of `shape` and reduce axes r0.. of `reduce`."""
    return Compute(
        axes=spatial_axes(shape),
        body=body,
        inputs=tuple(tensor_type(v) for v in inputs),
        dtype=dtype or (post.dtype if post is not None else body.dtype),
        reduce_axes=reduce_axes(reduce),
        reduce_op=reduce_op,
        post=post,
    )


def out_index(rank: int) -> list[Expr]:
    """The spatial axis variables i0..i{rank-1}."""
    return [Var(f"i{d}") for d in range(rank)]


def reduce_index(count: int) -> list[Expr]:
    """The reduce axis variables r0..r{count-1}."""
    return [Var(f"r{d}") for d in range(count)]


def elementwise(
    inputs: Sequence[Value], fn: Callable[..., Expr], what: str = "operands"
) -> Compute:
    """out = fn(*broadcast loads of inputs) over the broadcast shape of the inputs."""
    shape = broadcast_shape([v.shape for v in inputs], what)
    index = out_index(len(shape))
    loads = [load(i, v, broadcast_index(v.shape, index)) for i, v in enumerate(inputs)]
    return compute(shape, fn(*loads), inputs)
