"""Normalizations: Softmax / LogSoftmax / Hardmax, LayerNormalization, BatchNormalization,
InstanceNormalization, MeanVarianceNormalization, LpNormalization. Each is a few Computes:
the statistics as reductions, then one element-wise pass."""

from __future__ import annotations

import math
from collections.abc import Sequence

from onnx import TensorProto

from compiler.frontend.broadcast import broadcast_index
from compiler.frontend.dtypes import ir_dtype
from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.reduction import kept_index, reduce_values
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import dtype
from compiler.ir.te import ACC, Expr, Var, call, cast, select


def _float_input(cx: OpContext, i: int = 0) -> Value:
    x = cx.input(i)
    if not dtype(x.dtype).is_float:
        raise cx.unsupported(f"element type {x.dtype} (a floating-point type is required)")
    return x


def _softmax_axes(cx: OpContext, x: Value) -> list[int]:
    if cx.opset < 13:  # the input is flattened to 2-D at `axis`
        return list(range(cx.axis(cx.attr("axis", 1), x.rank), x.rank))
    return [cx.axis(cx.attr("axis", -1), x.rank)]


@lowering("Softmax", "LogSoftmax")
def softmax(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    return [softmax_values(cx, x, _softmax_axes(cx, x), log=cx.op == "LogSoftmax")]


def softmax_values(cx: OpContext, x: Value, axes: Sequence[int], log: bool) -> Value:
    """softmax of `x` over `axes`: max, the exponentials (computed once: they are most of
    the work), the reciprocal of their sum, then one multiply; log-softmax: max, sum of
    exponentials, then one element-wise pass."""
    m = reduce_values(cx, [x], axes, "max", lambda f: load(0, x, f))
    i = out_index(x.rank)
    k = kept_index(i, axes)
    if log:
        s = reduce_values(cx, [x, m], axes, "sum",
                          lambda f: call("exp", load(0, x, f) - load(1, m, kept_index(f, axes))))
        body = load(0, x, i) - load(1, m, k) - call("log", load(2, s, k))
        return cx.emit(compute(x.shape, body, [x, m, s]), [x, m, s])
    e = cx.emit(compute(x.shape, call("exp", load(0, x, i) - load(1, m, k)), [x, m]), [x, m])
    # One reciprocal per row, then a multiply per element: a division per element costs
    # several times a multiply (the max term makes every sum >= 1, so 1/sum is exact enough).
    inv = reduce_values(cx, [e], axes, "sum", lambda f: load(0, e, f), lambda acc, _: scalar(1.0, acc) / acc)
    return cx.emit(compute(x.shape, load(0, e, i) * load(1, inv, k), [e, inv]), [e, inv])


@lowering("Hardmax")
def hardmax(cx: OpContext) -> Outputs:
    x = cx.input(0)
    axes = _softmax_axes(cx, x)
    if len(axes) != 1:
        raise cx.unsupported("Hardmax over flattened axes (opset < 13)")
    (a,) = axes
    m = reduce_values(cx, [x], axes, "max", lambda f: load(0, x, f))
    first = reduce_values(
        cx, [x, m], axes, "min",
        lambda f: select(call("eq", load(0, x, f), load(1, m, kept_index(f, axes))), f[a], idx(x.shape[a])))
    i = out_index(x.rank)
    body = select(call("eq", i[a], load(1, first, kept_index(i, axes))), scalar(1, x.dtype), scalar(0, x.dtype))
    return [cx.emit(compute(x.shape, body, [x, first]), [x, first])]


def moments(cx: OpContext, x: Value, axes: Sequence[int], eps: float,
            stash: str | None = None) -> tuple[Value, Value]:
    """Mean and 1/sqrt(variance + eps) of `x` over `axes` (kept dims only), computed in and
    of dtype `stash` (default x's)."""
    n = math.prod(x.shape[d] for d in axes)
    to = stash or x.dtype
    mean = reduce_values(cx, [x], axes, "sum", lambda f: cast(load(0, x, f), to), lambda acc, i: acc / scalar(n, acc))

    def square(f: list[Expr]) -> Expr:
        d = cast(load(0, x, f), to) - load(1, mean, kept_index(f, axes))
        return d * d

    inv = reduce_values(cx, [x, mean], axes, "sum", square,
                        lambda acc, i: scalar(1.0, acc) / call("sqrt", acc / scalar(n, acc) + scalar(eps, acc)))
    return mean, inv


def normalized(cx: OpContext, x: Value, axes: Sequence[int], mean: Value, inv: Value,
               scale: Value | None, bias: Value | None, param_index) -> Value:
    """(x - mean) * inv * scale + bias, with scale/bias indexed by `param_index(value, i)`;
    (x - mean) * inv in the statistics' dtype, the rest in x's."""
    i = out_index(x.rank)
    k = kept_index(i, axes)
    inputs = [x, mean, inv]
    body = cast((cast(load(0, x, i), mean.dtype) - load(1, mean, k)) * load(2, inv, k), x.dtype)
    for p in (scale, bias):
        if p is None:
            continue
        term = load(len(inputs), p, param_index(p, i))
        inputs.append(p)
        body = body * term if p is scale else body + term
    return cx.emit(compute(x.shape, body, inputs), inputs)


def _stash_type(cx: OpContext) -> str:
    """The dtype of a normalization's statistics (its stash_type attribute, float32 by default)."""
    return ir_dtype(int(cx.attr("stash_type", TensorProto.FLOAT)), f"{cx.op} stash_type")


@lowering("LayerNormalization")
def layer_norm(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    axis = cx.axis(cx.attr("axis", -1), x.rank)
    axes = list(range(axis, x.rank))
    mean, inv = moments(cx, x, axes, float(cx.attr("epsilon", 1e-5)), _stash_type(cx))
    y = normalized(cx, x, axes, mean, inv, cx.input(1), cx.optional(2),
                   lambda p, i: broadcast_index(p.shape, i))
    stat_shape = [*x.shape[:axis], *[1] * (x.rank - axis)]
    return [y, cx.view(mean, stat_shape), cx.view(inv, stat_shape)]


@lowering("RMSNormalization")
def rms_norm(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    axis = cx.axis(cx.attr("axis", -1), x.rank)
    axes = list(range(axis, x.rank))
    n = math.prod(x.shape[d] for d in axes)
    eps = float(cx.attr("epsilon", 1e-5))
    inv = reduce_values(cx, [x], axes, "sum", lambda f: load(0, x, f) * load(0, x, f),
                        lambda acc, i: scalar(1.0, acc) / call("sqrt", acc / scalar(n, acc) + scalar(eps, acc)))
    scale = cx.input(1)
    i = out_index(x.rank)
    body = load(0, x, i) * load(1, inv, kept_index(i, axes)) * load(2, scale, broadcast_index(scale.shape, i))
    return [cx.emit(compute(x.shape, body, [x, inv, scale]), [x, inv, scale])]


@lowering("GroupNormalization")
def group_norm(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    groups = int(cx.attr("num_groups"))
    n, c = x.shape[:2]
    if c % groups:
        raise cx.error(f"{c} channels do not split into {groups} groups")
    per = c // groups
    grouped = cx.view(x, (n, groups, math.prod(x.shape[1:]) // groups))
    # opset 18 computes in x's type, opset 21 in stash_type (float32 by default)
    stash = _stash_type(cx) if cx.opset >= 21 else None
    mean, inv = moments(cx, grouped, [2], float(cx.attr("epsilon", 1e-5)), stash)
    scale, bias = cx.input(1), cx.input(2)
    i = out_index(x.rank)
    g = [i[0], call("floordiv", i[1], idx(per))]
    # opset 18 gives scale and bias per group, opset 21 per channel
    at = [i[1]] if scale.shape == (c,) else [g[1]]
    norm = cast((cast(load(0, x, i), mean.dtype) - load(1, mean, g)) * load(2, inv, g), x.dtype)
    body = norm * load(3, scale, at) + load(4, bias, at)
    inputs = [x, mean, inv, scale, bias]
    return [cx.emit(compute(x.shape, body, inputs), inputs)]


@lowering("LRN")
def lrn(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    size = int(cx.attr("size"))
    alpha, beta, bias = (float(cx.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    i = out_index(x.rank)
    (r,) = reduce_index(1)
    v = load(0, x, [i[0], i[1] + r - idx((size - 1) // 2), *i[2:]], pad=0.0)
    post = load(0, x, i) / call("pow", scalar(bias, v) + scalar(alpha / size, v) * Var(ACC, v.dtype),
                                scalar(beta, v))
    return [cx.emit(compute(x.shape, v * v, [x], reduce=[size], reduce_op="sum", post=post), [x])]


def _channel(p: Value, i: list[Expr]) -> list[Expr]:
    return [i[1]]


@lowering("InstanceNormalization")
def instance_norm(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    axes = list(range(2, x.rank))
    mean, inv = moments(cx, x, axes, float(cx.attr("epsilon", 1e-5)))
    return [normalized(cx, x, axes, mean, inv, cx.input(1), cx.input(2), _channel)]


@lowering("MeanVarianceNormalization")
def mean_variance_norm(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    axes = sorted({cx.axis(a, x.rank) for a in cx.attr("axes", [0, 2, 3])})
    mean, inv = moments(cx, x, axes, 1e-9)
    return [normalized(cx, x, axes, mean, inv, None, None, _channel)]


@lowering("BatchNormalization")
def batch_norm(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    if cx.attr("training_mode", 0):
        raise cx.unsupported("training mode (running statistics outputs)")
    params = [cx.input(k) for k in range(1, 5)]
    c = x.shape[1] if x.rank > 1 else 1
    if any(p.shape != (c,) for p in params):
        raise cx.unsupported("per-activation statistics (spatial=0)")
    eps = float(cx.attr("epsilon", 1e-5))
    i = out_index(x.rank)
    scale, bias, mean, var = (load(1 + k, p, [i[1]]) for k, p in enumerate(params))
    norm = (load(0, x, i) - mean) / call("sqrt", var + scalar(eps, var))
    inputs = [x, *params]
    return [cx.emit(compute(x.shape, norm * scale + bias, inputs), inputs)]


@lowering("LpNormalization")
def lp_norm(cx: OpContext) -> Outputs:
    x = _float_input(cx)
    axis = cx.axis(cx.attr("axis", -1), x.rank)
    p = int(cx.attr("p", 2))
    if p not in (1, 2):
        raise cx.error(f"p must be 1 or 2, got {p}")
    norm = reduce_values(cx, [x], [axis], "sum",
                         lambda f: call("abs", load(0, x, f)) if p == 1 else load(0, x, f) * load(0, x, f),
                         None if p == 1 else (lambda acc, i: call("sqrt", acc)))
    i = out_index(x.rank)
    n = load(1, norm, kept_index(i, [axis]))
    body = select(call("eq", n, scalar(0, n)), scalar(0, n), load(0, x, i) / n)  # a zero vector stays zero
    return [cx.emit(compute(x.shape, body, [x, norm]), [x, norm])]

