"""Integer and quantized contractions: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.

Products accumulate in int32 after subtracting zero points; the QLinear forms
then requantize: round-half-even(acc * scale_a * scale_b / scale_y) + zero_y,
saturated to the output type.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.broadcast import broadcast_index
from compiler.frontend.exprs import compute, idx, load, out_index, scalar
from compiler.frontend.ops.contraction import conv_values, matmul_values
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import dtype
from compiler.ir.te import Expr, call, cast

ACC_TYPE = "int32"


def _zero_point_at(zp: Value, along: Expr | None) -> list[Expr]:
    """Index of the zero point (or scale) for an element: per tensor, or per row / column / channel."""
    if zp.rank == 0:
        return []
    if zp.shape == (1,) or along is None:
        return [idx(0)]
    return [along]


def _shifted(v: Expr, zp: Value | None, position: int, along: Expr | None) -> Expr:
    """`v - zero point` in the accumulator type (the zero point is Compute input `position`)."""
    v = cast(v, ACC_TYPE)
    if zp is None:
        return v
    return v - cast(load(position, zp, _zero_point_at(zp, along)), ACC_TYPE)


def _integer_matmul(cx: OpContext, a: Value, b: Value, a_zp: Value | None, b_zp: Value | None) -> Value:
    extra = [z for z in (a_zp, b_zp) if z is not None]
    a_pos, b_pos = 2, 2 + (a_zp is not None)
    return matmul_values(cx, a, b, lambda x, y, row, col: _shifted(x, a_zp, a_pos, row) * _shifted(y, b_zp, b_pos, col),
                         extra)


def _integer_conv(cx: OpContext, x: Value, w: Value, x_zp: Value | None, w_zp: Value | None,
                  bias: Value | None) -> Value:
    extra = [z for z in (x_zp, w_zp) if z is not None]
    first = 2 + (bias is not None)
    x_pos, w_pos = first, first + (x_zp is not None)
    pad = 0 if x_zp is None else int(np.asarray(cx.const_input(2, "x_zero_point")).reshape(-1)[0])
    return conv_values(cx, x, w, bias, int(cx.attr("group", 1)),
                       lambda v, k, m, _: _shifted(v, x_zp, x_pos, None) * _shifted(k, w_zp, w_pos, m), extra, pad)


@lowering("MatMulInteger")
def matmul_integer(cx: OpContext) -> Outputs:
    return [_integer_matmul(cx, cx.input(0), cx.input(1), cx.optional(2), cx.optional(3))]


@lowering("ConvInteger")
def conv_integer(cx: OpContext) -> Outputs:
    return [_integer_conv(cx, cx.input(0), cx.input(1), cx.optional(2), cx.optional(3), None)]


def requantize(cx: OpContext, acc: Value, scales: list[tuple[Value, int | None]], y_scale: Value,
               y_zp: Value | None) -> Value:
    """Saturate(round(acc * prod(scales) / y_scale) + y_zp); a scale with an axis is per that output dim."""
    out_dt = y_zp.dtype if y_zp is not None else "uint8"
    info = np.iinfo(dtype(out_dt).np_type)
    i = out_index(acc.rank)
    inputs = [acc]
    real: Expr = cast(load(0, acc, i), "float32")
    for s, axis in scales:
        real = real * cast(load(len(inputs), s, _zero_point_at(s, None if axis is None else i[axis])), "float32")
        inputs.append(s)
    real = real / cast(load(len(inputs), y_scale, broadcast_index(y_scale.shape, i)), "float32")
    inputs.append(y_scale)
    q = call("round", real)
    if y_zp is not None:
        q = q + cast(load(len(inputs), y_zp, broadcast_index(y_zp.shape, i)), "float32")
        inputs.append(y_zp)
    q = call("min", call("max", q, scalar(float(info.min), q)), scalar(float(info.max), q))
    return cx.emit(compute(acc.shape, cast(q, out_dt), inputs), inputs)


@lowering("QLinearMatMul")
def qlinear_matmul(cx: OpContext) -> Outputs:
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (cx.optional(k) for k in range(8))
    assert a is not None and b is not None and a_s is not None and b_s is not None and y_s is not None
    acc = _integer_matmul(cx, a, b, a_zp, b_zp)
    return [requantize(cx, acc, [(a_s, None), (b_s, acc.rank - 1)], y_s, y_zp)]


@lowering("QLinearConv")
def qlinear_conv(cx: OpContext) -> Outputs:
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, bias = (cx.optional(k) for k in range(9))
    assert x is not None and w is not None and x_s is not None and w_s is not None and y_s is not None
    acc = _integer_conv(cx, x, w, x_zp, w_zp, bias)
    return [requantize(cx, acc, [(x_s, None), (w_s, 1)], y_s, y_zp)]
