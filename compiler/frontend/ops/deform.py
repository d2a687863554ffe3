"""DeformConv: a convolution whose taps move by learned offsets (and are scaled by an optional mask).

One reduce Compute over (input channel, kernel..., bilinear corner per dim);
corners outside the input read zero through padded loads.
"""

from __future__ import annotations

import math

from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.ir.dtypes import INDEX
from compiler.ir.te import ACC, Expr, Var, call, cast, select


@lowering("DeformConv")
def deform_conv(cx: OpContext) -> Outputs:
    x, w, offset, bias, mask = (cx.optional(k) for k in range(5))
    assert x is not None and w is not None and offset is not None
    nd = x.rank - 2
    groups, offset_groups = int(cx.attr("group", 1)), int(cx.attr("offset_group", 1))
    kernel = list(cx.attr("kernel_shape", w.shape[2:]))
    strides = list(cx.attr("strides", [1] * nd))
    dil = list(cx.attr("dilations", [1] * nd))
    pads = list(cx.attr("pads", [0] * 2 * nd))
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    taps = math.prod(kernel)
    if c != cg * groups or m % groups or c % offset_groups or offset.shape[1] != offset_groups * taps * nd:
        raise cx.error(f"channels, groups and offsets do not fit: x {list(x.shape)}, w {list(w.shape)}, "
                       f"offset {list(offset.shape)}")
    out = offset.shape[2:]
    i = out_index(2 + nd)
    r = reduce_index(1 + 2 * nd)
    ci, ks, corners = r[0], r[1:1 + nd], r[1 + nd:]
    channel = ci if groups == 1 else call("floordiv", i[1], idx(m // groups)) * idx(cg) + ci
    group = call("floordiv", channel, idx(c // offset_groups))
    tap: Expr = idx(0)
    for d in range(nd):
        tap = tap * idx(kernel[d]) + ks[d]
    inputs = [x, w, offset]
    weight: Expr = load(1, w, [i[1], ci, *ks])
    at: list[Expr] = [i[0], channel]
    for d in range(nd):
        shift = load(2, offset, [i[0], (group * idx(taps) + tap) * idx(nd) + idx(d), *i[2:]])
        pos = cast(i[2 + d] * idx(strides[d]) - idx(pads[d]) + ks[d] * idx(dil[d]), shift.dtype) + shift
        low = call("floor", pos)
        frac = pos - low
        weight = weight * select(call("eq", corners[d], idx(0)), scalar(1.0, frac) - frac, frac)
        at.append(cast(low, INDEX) + corners[d])
    if mask is not None:
        weight = weight * load(len(inputs), mask, [i[0], group * idx(taps) + tap, *i[2:]])
        inputs.append(mask)
    body = load(0, x, at, pad=0.0) * weight
    post = None
    if bias is not None:
        post = Var(ACC, body.dtype) + load(len(inputs), bias, [i[1]])
        inputs.append(bias)
    c_ = compute((n, m, *out), body, inputs, reduce=[cg, *kernel, *[2] * nd], reduce_op="sum", post=post)
    return [cx.emit(c_, inputs)]
