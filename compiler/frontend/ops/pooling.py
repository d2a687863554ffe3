"""Pooling: MaxPool, AveragePool, LpPool and their global forms, each one reduce Compute."""

from __future__ import annotations

import math

from compiler.frontend.exprs import compute, load, out_index, reduce_index, scalar
from compiler.frontend.ops.windows import Window, valid_count, window_of
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import dtype
from compiler.ir.te import ACC, INIT, Expr, Var, call, cast


def _window(cx: OpContext, x: Value) -> Window:
    if x.rank < 3:
        raise cx.error(f"input {list(x.shape)} has no spatial dims")
    kernel = cx.attr("kernel_shape")
    if kernel is None:
        raise cx.error("kernel_shape is required")
    return window_of(cx, x.shape[2:], kernel, bool(cx.attr("ceil_mode", 0)))


def _window_loads(x: Value, w: Window, pad: float | int | None) -> tuple[list[Expr], Expr]:
    nd = x.rank - 2
    i = out_index(x.rank)
    r = reduce_index(nd)
    at = [i[0], i[1], *(w.position(d, i[2 + d], r[d]) for d in range(nd))]
    return i, load(0, x, at, pad=pad if w.reads_outside(x.shape[2:]) else None)


@lowering("MaxPool")
def max_pool(cx: OpContext) -> Outputs:
    x = cx.input(0)
    if cx.attr("storage_order", 0) != 0:
        raise cx.unsupported("storage_order=1 (column-major indices)")
    if cx.num_outputs > 1:
        raise cx.unsupported("the Indices output")
    w = _window(cx, x)
    _, body = _window_loads(x, w, INIT["max"](x.dtype))
    shape = (*x.shape[:2], *w.out)
    return [cx.emit(compute(shape, body, [x], reduce=w.kernel, reduce_op="max"), [x])]


def _window_size(x: Value, w: Window, i: list[Expr], include_pad: bool) -> Expr | int:
    """Taps each window averages over: a constant when every window is whole, else an index expr."""
    spatial = x.shape[2:]
    if not w.reads_outside(spatial):
        return math.prod(w.kernel)
    count: Expr | None = None
    for d in range(len(spatial)):
        if include_pad:
            c = valid_count(w, d, i[2 + d], 0, spatial[d] + w.pad_begin[d] + w.pad_end[d])
        else:
            c = valid_count(w, d, i[2 + d], w.pad_begin[d], spatial[d])
        count = c if count is None else count * c
    assert count is not None
    return count


@lowering("AveragePool")
def average_pool(cx: OpContext) -> Outputs:
    x = cx.input(0)
    if not dtype(x.dtype).is_float:
        raise cx.unsupported(f"element type {x.dtype}")
    w = _window(cx, x)
    i, body = _window_loads(x, w, 0.0)
    n = _window_size(x, w, i, bool(cx.attr("count_include_pad", 0)))
    acc = Var(ACC, x.dtype)
    post = acc / (scalar(n, x.dtype) if isinstance(n, int) else cast(n, x.dtype))
    shape = (*x.shape[:2], *w.out)
    return [cx.emit(compute(shape, body, [x], reduce=w.kernel, reduce_op="sum", post=post), [x])]


@lowering("LpPool")
def lp_pool(cx: OpContext) -> Outputs:
    x = cx.input(0)
    p = float(cx.attr("p", 2))
    w = _window(cx, x)
    _, v = _window_loads(x, w, 0.0)
    body = call("pow", call("abs", v), scalar(p, v))
    post = call("pow", Var(ACC, x.dtype), scalar(1.0 / p, x.dtype))
    shape = (*x.shape[:2], *w.out)
    return [cx.emit(compute(shape, body, [x], reduce=w.kernel, reduce_op="sum", post=post), [x])]


@lowering("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(cx: OpContext) -> Outputs:
    x = cx.input(0)
    if x.rank < 3:
        raise cx.error(f"input {list(x.shape)} has no spatial dims")
    nd = x.rank - 2
    i = out_index(2)
    v = load(0, x, [*i, *reduce_index(nd)])
    acc = Var(ACC, x.dtype)
    if cx.op == "GlobalMaxPool":
        body, op, post = v, "max", None
    elif cx.op == "GlobalAveragePool":
        body, op, post = v, "sum", acc / scalar(math.prod(x.shape[2:]), x.dtype)
    else:
        p = float(cx.attr("p", 2))
        body, op = call("pow", call("abs", v), scalar(p, v)), "sum"
        post = call("pow", acc, scalar(1.0 / p, x.dtype))
    pooled = cx.emit(compute(x.shape[:2], body, [x], reduce=x.shape[2:], reduce_op=op, post=post), [x])
    return [cx.view(pooled, (*x.shape[:2], *[1] * nd))]
