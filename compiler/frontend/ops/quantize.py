"""QuantizeLinear and DequantizeLinear (per tensor, per axis or blocked scales) on 8/16-bit integers."""

from __future__ import annotations

import numpy as np

from compiler.frontend.dtypes import ir_dtype
from compiler.frontend.exprs import compute, idx, load, out_index, scalar
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import dtype
from compiler.ir.te import Expr, call, cast


def _scale_index(cx: OpContext, x: Value, scale: Value, i: list[Expr]) -> list[Expr]:
    """Where element `i` of `x` reads its scale / zero point: per tensor, per axis or per block."""
    if scale.rank == 0 or scale.shape == (1,):
        return [idx(0)] * scale.rank
    axis = cx.axis(cx.attr("axis", 1), x.rank)
    block = int(cx.attr("block_size", 0))
    if block == 0:
        if scale.shape != (x.shape[axis],):
            raise cx.error(f"scale {list(scale.shape)} does not fit axis {axis} of {list(x.shape)}")
        return [i[axis]]
    return [call("floordiv", i[d], idx(block)) if d == axis else i[d] for d in range(x.rank)]


@lowering("DequantizeLinear")
def dequantize(cx: OpContext) -> Outputs:
    x, scale, zero = cx.input(0), cx.input(1), cx.optional(2)
    out_dt = ir_dtype(int(cx.attr("output_dtype")), "output_dtype") if cx.attr("output_dtype") else scale.dtype
    i = out_index(x.rank)
    at = _scale_index(cx, x, scale, i)
    v = cast(load(0, x, i), out_dt)
    inputs = [x, scale]
    if zero is not None:
        v = v - cast(load(2, zero, at), out_dt)
        inputs.append(zero)
    body = v * cast(load(1, scale, at), out_dt)
    return [cx.emit(compute(x.shape, body, inputs), inputs)]


@lowering("QuantizeLinear")
def quantize(cx: OpContext) -> Outputs:
    x, scale, zero = cx.input(0), cx.input(1), cx.optional(2)
    if zero is not None:
        out_dt = zero.dtype
    elif cx.attr("output_dtype"):
        out_dt = ir_dtype(int(cx.attr("output_dtype")), "output_dtype")
    else:
        out_dt = "uint8"
    if dtype(out_dt).is_float or out_dt == "bool":
        raise cx.unsupported(f"quantizing to {out_dt}")
    info = np.iinfo(dtype(out_dt).np_type)
    i = out_index(x.rank)
    at = _scale_index(cx, x, scale, i)
    q = call("round", load(0, x, i) / cast(load(1, scale, at), x.dtype))  # half to even
    inputs = [x, scale]
    if zero is not None:
        q = q + cast(load(2, zero, at), x.dtype)
        inputs.append(zero)
    q = call("min", call("max", q, scalar(float(info.min), q)), scalar(float(info.max), q))
    return [cx.emit(compute(x.shape, cast(q, out_dt), inputs), inputs)]
