"""Element-wise operators: unary maps, broadcasting binaries, variadics, Where, Clip, Cast."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import reduce

import numpy as np

from compiler.frontend.broadcast import broadcast_shape
from compiler.frontend.dtypes import ir_dtype
from compiler.frontend.exprs import elementwise, scalar
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import dtype
from compiler.ir.te import Expr, call, cast, const, select

Unary = Callable[[Expr, OpContext], Expr]


def _map(cx: OpContext, inputs: list[Value], fn: Callable[..., Expr]) -> Outputs:
    return [cx.emit(elementwise(inputs, fn, f"{cx.op} operands"), inputs)]


def _needs_float(cx: OpContext, v: Value) -> None:
    if not dtype(v.dtype).is_float:
        raise cx.unsupported(f"element type {v.dtype} (a floating-point type is required)")


def _sigmoid(x: Expr) -> Expr:
    return scalar(1.0, x) / (scalar(1.0, x) + call("exp", -x))


def _softplus(x: Expr) -> Expr:
    return call("log", call("exp", x) + scalar(1.0, x))


def _gelu(x: Expr, cx: OpContext) -> Expr:
    half, one = scalar(0.5, x), scalar(1.0, x)
    if cx.attr("approximate", "none") == "tanh":
        inner = scalar(math.sqrt(2.0 / math.pi), x) * (x + scalar(0.044715, x) * x * x * x)
        return half * x * (one + call("tanh", inner))
    return half * x * (one + call("erf", x * scalar(1.0 / math.sqrt(2.0), x)))


def _hard_sigmoid(x: Expr, alpha: float, beta: float) -> Expr:
    return call("max", scalar(0.0, x), call("min", scalar(1.0, x), scalar(alpha, x) * x + scalar(beta, x)))


def _selu(x: Expr, cx: OpContext) -> Expr:
    alpha = cx.attr("alpha", 1.67326319217681884765625)
    gamma = cx.attr("gamma", 1.05070102214813232421875)
    neg = scalar(alpha, x) * call("exp", x) - scalar(alpha, x)
    return scalar(gamma, x) * select(call("le", x, scalar(0, x)), neg, x)


def _shrink(x: Expr, cx: OpContext) -> Expr:
    lambd, bias = cx.attr("lambd", 0.5), cx.attr("bias", 0.0)
    return select(call("lt", x, scalar(-lambd, x)), x + scalar(bias, x),
                  select(call("gt", x, scalar(lambd, x)), x - scalar(bias, x), scalar(0, x)))


def _is_inf(x: Expr, cx: OpContext) -> Expr:
    pos, neg = cx.attr("detect_positive", 1), cx.attr("detect_negative", 1)
    inf = call("isinf", x)
    if pos and neg:
        return inf
    if not pos and not neg:
        return call("and", inf, call("ne", x, x))  # always false, keeps the bool type
    return call("and", inf, call("gt" if pos else "lt", x, scalar(0, x)))


# op -> (body, needs a float input)
UNARY: dict[str, tuple[Unary, bool]] = {
    "Relu": (lambda x, cx: call("max", x, scalar(0, x)), False),
    "Abs": (lambda x, cx: call("abs", x), False),
    "Neg": (lambda x, cx: -x, False),
    "Sign": (lambda x, cx: call("sign", x), False),
    "Not": (lambda x, cx: call("not", x), False),
    "BitwiseNot": (lambda x, cx: call("bitnot", x), False),
    "Sigmoid": (lambda x, cx: _sigmoid(x), True),
    "Tanh": (lambda x, cx: call("tanh", x), True),
    "Erf": (lambda x, cx: call("erf", x), True),
    "Gelu": (_gelu, True),
    "Exp": (lambda x, cx: call("exp", x), True),
    "Log": (lambda x, cx: call("log", x), True),
    "Sqrt": (lambda x, cx: call("sqrt", x), True),
    "Reciprocal": (lambda x, cx: scalar(1.0, x) / x, True),
    "Floor": (lambda x, cx: call("floor", x), True),
    "Ceil": (lambda x, cx: call("ceil", x), True),
    "Round": (lambda x, cx: call("round", x), True),
    "Sin": (lambda x, cx: call("sin", x), True),
    "Cos": (lambda x, cx: call("cos", x), True),
    "Tan": (lambda x, cx: call("tan", x), True),
    "Asin": (lambda x, cx: call("asin", x), True),
    "Acos": (lambda x, cx: call("acos", x), True),
    "Atan": (lambda x, cx: call("atan", x), True),
    "Sinh": (lambda x, cx: call("sinh", x), True),
    "Cosh": (lambda x, cx: call("cosh", x), True),
    "Asinh": (lambda x, cx: call("asinh", x), True),
    "Acosh": (lambda x, cx: call("acosh", x), True),
    "Atanh": (lambda x, cx: call("atanh", x), True),
    "IsNaN": (lambda x, cx: call("isnan", x), True),
    "IsInf": (_is_inf, True),
    "Softplus": (lambda x, cx: _softplus(x), True),
    "Softsign": (lambda x, cx: x / (scalar(1.0, x) + call("abs", x)), True),
    "Mish": (lambda x, cx: x * call("tanh", _softplus(x)), True),
    "LeakyRelu": (lambda x, cx: select(call("lt", x, scalar(0, x)), scalar(cx.attr("alpha", 0.01), x) * x, x),
                  True),
    "Elu": (lambda x, cx: select(call("lt", x, scalar(0, x)),
                                 scalar(cx.attr("alpha", 1.0), x) * (call("exp", x) - scalar(1.0, x)), x),
            True),
    "Celu": (lambda x, cx: call("max", scalar(0, x), x) + call(
        "min", scalar(0, x),
        scalar(cx.attr("alpha", 1.0), x) * (call("exp", x / scalar(cx.attr("alpha", 1.0), x)) - scalar(1.0, x))),
        True),
    "Selu": (_selu, True),
    "ThresholdedRelu": (lambda x, cx: select(call("gt", x, scalar(cx.attr("alpha", 1.0), x)), x, scalar(0, x)),
                        True),
    "HardSigmoid": (lambda x, cx: _hard_sigmoid(x, cx.attr("alpha", 0.2), cx.attr("beta", 0.5)), True),
    "HardSwish": (lambda x, cx: x * _hard_sigmoid(x, 1.0 / 6.0, 0.5), True),
    "Swish": (lambda x, cx: x * _sigmoid(scalar(cx.attr("alpha", 1.0), x) * x), True),
    "Shrink": (_shrink, False),
}


@lowering(*UNARY)
def unary(cx: OpContext) -> Outputs:
    x = cx.input(0)
    body, float_only = UNARY[cx.op]
    if float_only:
        _needs_float(cx, x)
    return _map(cx, [x], lambda a: body(a, cx))


BINARY: dict[str, str] = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div",
    "Equal": "eq", "Less": "lt", "Greater": "gt", "LessOrEqual": "le", "GreaterOrEqual": "ge",
    "And": "and", "Or": "or", "Xor": "xor",
    "BitwiseAnd": "bitand", "BitwiseOr": "bitor", "BitwiseXor": "bitxor",
}


@lowering(*BINARY)
def binary(cx: OpContext) -> Outputs:
    a, b = cx.input(0), cx.input(1)
    if a.dtype != b.dtype:
        raise cx.error(f"operand types differ: {a.dtype} and {b.dtype}")
    return _map(cx, [a, b], lambda x, y: call(BINARY[cx.op], x, y))


@lowering("Pow")
def pow_(cx: OpContext) -> Outputs:
    base, exponent = cx.input(0), cx.input(1)
    k = _uniform_exponent(base, exponent)
    # A literal, so the TE writes a small integer power as multiplies (RMSNorm's x^2 and
    # GELU-tanh's x^3 went through the scalar libm pow, ~9 ns an element).
    if k is not None:
        return _map(cx, [base], lambda x: call("pow", x, const(k, x.dtype)))
    return _map(cx, [base, exponent], lambda x, y: call("pow", x, cast(y, x.dtype)))


def _uniform_exponent(base: Value, exponent: Value) -> float | None:
    """The value of a constant exponent that is the same everywhere and does not widen the
    base's shape (x ** 3 as exporters write it), in the base's float type; else None."""
    a = exponent.array
    if a is None or a.size == 0 or not dtype(base.dtype).is_float:
        return None
    if broadcast_shape([base.shape, exponent.shape], "Pow operands") != tuple(base.shape):
        return None
    first = a.reshape(-1)[0]
    return float(first) if bool(np.all(a == first)) else None


def _float_mod(x: Expr, y: Expr) -> Expr:
    """Remainder with the divisor's sign: fmod, moved by one divisor when the signs differ."""
    r = call("fmod", x, y)
    zero = scalar(0, r)
    differ = call("and", call("ne", r, zero), call("xor", call("lt", r, zero), call("lt", y, zero)))
    return select(differ, r + y, r)


@lowering("Mod")
def mod(cx: OpContext) -> Outputs:
    a, b = cx.input(0), cx.input(1)
    if cx.attr("fmod", 0):
        return _map(cx, [a, b], lambda x, y: call("fmod", x, y))
    if dtype(a.dtype).is_float:
        return _map(cx, [a, b], _float_mod)
    return _map(cx, [a, b], lambda x, y: call("mod", x, y))


@lowering("BitShift")
def bit_shift(cx: OpContext) -> Outputs:
    op = "shl" if cx.attr("direction") == "LEFT" else "shr"
    return _map(cx, [cx.input(0), cx.input(1)], lambda x, y: call(op, x, y))


@lowering("PRelu")
def prelu(cx: OpContext) -> Outputs:
    x, slope = cx.input(0), cx.input(1)
    return _map(cx, [x, slope], lambda a, s: select(call("lt", a, scalar(0, a)), s * a, a))


VARIADIC = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}


@lowering(*VARIADIC)
def variadic(cx: OpContext) -> Outputs:
    inputs = [v for v in cx.inputs if v is not None]
    if not inputs:
        raise cx.error("needs at least one input")

    def body(*xs: Expr) -> Expr:
        acc = reduce(lambda p, q: call(VARIADIC[cx.op], p, q), xs)
        return acc / scalar(len(xs), acc) if cx.op == "Mean" else acc

    return _map(cx, inputs, body)


@lowering("Where")
def where(cx: OpContext) -> Outputs:
    return _map(cx, [cx.input(0), cx.input(1), cx.input(2)], lambda c, x, y: select(c, x, y))


@lowering("Clip")
def clip(cx: OpContext) -> Outputs:
    x = cx.input(0)
    if "min" in cx.attrs or "max" in cx.attrs:  # opset < 11: bounds are attributes
        lo = cx.attr("min", -np.inf)
        hi = cx.attr("max", np.inf)
        return _map(cx, [x], lambda a: call("min", call("max", a, scalar(lo, a)), scalar(hi, a)))
    bounds = [(v, op) for v, op in ((cx.optional(1), "max"), (cx.optional(2), "min")) if v is not None]

    def body(a: Expr, *bs: Expr) -> Expr:
        for b, (_, op) in zip(bs, bounds, strict=True):
            a = call(op, a, b)
        return a

    return _map(cx, [x, *(v for v, _ in bounds)], body)


def convert(x: Expr, to: str) -> Expr:
    """ONNX Cast semantics: to bool means "is non-zero"; float to int truncates."""
    if to == "bool" and x.dtype != "bool":
        return call("ne", x, scalar(0, x))
    return cast(x, to)


@lowering("Cast")
def cast_(cx: OpContext) -> Outputs:
    to = ir_dtype(int(cx.attr("to")), f"{cx.op} target")
    return _map(cx, [cx.input(0)], lambda a: convert(a, to))


@lowering("CastLike")
def cast_like(cx: OpContext) -> Outputs:
    to = cx.input(1).dtype
    return _map(cx, [cx.input(0)], lambda a: convert(a, to))
