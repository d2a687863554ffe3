"""Col2Im and MaxUnpool: sums of scattered patches, written as gathers that test which
source element lands on each output element."""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.exprs import clamp, compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.ir.te import Expr, call, select


@lowering("Col2Im")
def col2im(cx: OpContext) -> Outputs:
    x = cx.input(0)
    image = [int(v) for v in np.asarray(cx.const_input(1, "image_shape")).reshape(-1)]
    block = [int(v) for v in np.asarray(cx.const_input(2, "block_shape")).reshape(-1)]
    nd = len(image)
    dil = list(cx.attr("dilations", [1] * nd))
    pads = list(cx.attr("pads", [0] * 2 * nd))
    strides = list(cx.attr("strides", [1] * nd))
    n, cols, length = x.shape
    per = math.prod(block)
    if cols % per:
        raise cx.error(f"{cols} columns do not split into blocks of {per}")
    blocks = [(image[d] + pads[d] + pads[nd + d] - dil[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(nd)]
    if math.prod(blocks) != length:
        raise cx.error(f"{length} columns per image, the geometry gives {math.prod(blocks)}")
    i = out_index(2 + nd)
    k = reduce_index(nd)
    channel: Expr = i[1] * idx(per)
    column: Expr = idx(0)
    hit: Expr | None = None
    for d in range(nd):
        q = i[2 + d] + idx(pads[d]) - k[d] * idx(dil[d])  # = block position * stride when this tap lands here
        pos = call("floordiv", q, idx(strides[d]))
        ok = call("and", call("eq", call("floormod", q, idx(strides[d])), idx(0)),
                  call("and", call("ge", pos, idx(0)), call("lt", pos, idx(blocks[d]))))
        hit = ok if hit is None else call("and", hit, ok)
        channel = channel + k[d] * idx(math.prod(block[d + 1:]))
        column = column * idx(blocks[d]) + clamp(pos, 0, blocks[d] - 1)
    assert hit is not None
    body = select(hit, load(0, x, [i[0], channel, column]), scalar(0, x.dtype))
    return [cx.emit(compute((n, cols // per, *image), body, [x], reduce=block, reduce_op="sum"), [x])]


@lowering("MaxUnpool")
def max_unpool(cx: OpContext) -> Outputs:
    x, ind = cx.input(0), cx.input(1)
    nd = x.rank - 2
    kernel = list(cx.attr("kernel_shape"))
    strides = list(cx.attr("strides", [1] * nd))
    pads = list(cx.attr("pads", [0] * 2 * nd))
    # indices are flat offsets into the inferred shape; a larger output_shape pads it at the end
    inferred = (*x.shape[:2], *((x.shape[2 + d] - 1) * strides[d] + kernel[d] - pads[d] - pads[nd + d]
                                for d in range(nd)))
    given = cx.const_input(2, "output_shape")
    shape = inferred if given is None else tuple(int(v) for v in np.asarray(given).reshape(-1))
    if len(shape) != x.rank or any(s < n for s, n in zip(shape, inferred, strict=True)):
        raise cx.error(f"output_shape {list(shape)} is smaller than the unpooled {list(inferred)}")
    i = out_index(x.rank)
    r = reduce_index(nd)
    flat: Expr = idx(0)
    for d in range(x.rank):
        flat = flat * idx(inferred[d]) + i[d]
    src = [i[0], i[1], *r]
    hit = call("eq", load(1, ind, src), flat)
    for d in range(2, x.rank):
        if shape[d] > inferred[d]:
            hit = call("and", hit, call("lt", i[d], idx(inferred[d])))
    body = select(hit, load(0, x, src), scalar(0, x.dtype))
    return [cx.emit(compute(shape, body, [x, ind], reduce=x.shape[2:], reduce_op="sum"), [x, ind])]
