"""ConvTranspose as stride-1 convolutions, one per output phase, then interleaved.

Output o of a transposed convolution with stride s takes input (o + pad - k * dil) / s
from tap k when that divides evenly. Written as one masked sum over every tap, the
kernel does s^n times the work and divides every index (an exported UNet's 2x2
stride-2 upsampling ran at 0.19x onnxruntime). Instead, the outputs are split by
phase p = o mod s along each spatial axis: for one phase the taps that reach it
form an arithmetic progression, and the input each one reads is affine in the
phase's own output index, so each phase is an ordinary convolution (GEMM path,
weights packed at load). One element-wise pass interleaves the phases.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.contraction import conv_operands, emit_conv, widened
from compiler.frontend.ops.phases import interleave_phases, phase_select
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.te import Expr, call


def _transposed_geometry(cx: OpContext, spatial: tuple[int, ...], kernel: tuple[int, ...]
                         ) -> tuple[list[int], list[int], list[int], list[int]]:
    """ConvTranspose strides, dilations, leading pads and output sizes (ONNX's rules)."""
    nd = len(spatial)
    strides = list(cx.attr("strides", [1] * nd))
    dil = list(cx.attr("dilations", [1] * nd))
    out_pad = list(cx.attr("output_padding", [0] * nd))
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil, strict=True)]
    full = [s * (n - 1) + op + w for s, n, op, w in zip(strides, spatial, out_pad, span, strict=True)]
    auto_pad = cx.attr("auto_pad", "NOTSET")
    out_shape = cx.attr("output_shape")
    if out_shape is not None:
        out_shape = list(out_shape)[-nd:]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [n * s for n, s in zip(spatial, strides, strict=True)]
    if out_shape is not None:
        # a negative total pads the end with zeros (an implicit output_padding)
        total = [f - o for f, o in zip(full, out_shape, strict=True)]
        upper = auto_pad == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        return strides, dil, begin, out_shape
    pads = list(cx.attr("pads", [0] * (2 * nd)))
    out = [f - pads[d] - pads[nd + d] for d, f in enumerate(full)]
    return strides, dil, pads[:nd], out


@lowering("ConvTranspose")
def conv_transpose(cx: OpContext) -> Outputs:
    x, w, bias, nd, groups = conv_operands(cx)
    n, c = x.shape[:2]
    cg, mg = w.shape[:2]
    if c != cg or c % groups:
        raise cx.error(f"input channels {c} do not match the weight's {cg} in {groups} groups")
    kernel = tuple(w.shape[2:])
    strides, dil, begin, out = _transposed_geometry(cx, x.shape[2:], kernel)
    if any(o < 0 for o in out):
        raise cx.error(f"output size {out} is negative")
    phases: dict[tuple[int, ...], Value] = {}
    # phases that some output has (an empty axis keeps phase 0: the result is empty, not missing)
    for phase in itertools.product(*(range(max(1, min(s, o))) for s, o in zip(strides, out, strict=True))):
        phases[phase] = _phase_conv(cx, x, w, bias, groups, phase, strides, dil, begin, out)
    if len(phases) == 1 and all(s == 1 for s in strides):
        return [phases[(0,) * nd]]
    return [_interleave(cx, phases, strides, (n, mg * groups, *out))]


def _phase_conv(cx: OpContext, x: Value, w: Value, bias: Value | None, groups: int, phase: Sequence[int],
                strides: Sequence[int], dil: Sequence[int], begin: Sequence[int], out: Sequence[int]) -> Value:
    """The outputs o = phase + s * t of every spatial axis, as a convolution over t."""
    nd = x.rank - 2
    n, c = x.shape[:2]
    mg, kernel = w.shape[1], w.shape[2:]
    per = c // groups
    i, r = out_index(2 + nd), reduce_index(1 + nd)
    counts, x_at, w_at = [], [], []
    for d in range(nd):
        s, p = strides[d], phase[d]
        taps = [k for k in range(kernel[d]) if (p + begin[d] - k * dil[d]) % s == 0]
        step = taps[1] - taps[0] if len(taps) > 1 else 1
        first = taps[0] if taps else 0
        counts.append(len(taps))
        # tap first + step * j reads input t + (p + begin - first * dil) / s - j * step * dil / s
        x_at.append(i[2 + d] + idx((p + begin[d] - first * dil[d]) // s) - r[1 + d] * idx(step * dil[d] // s))
        w_at.append(idx(first) + r[1 + d] * idx(step))
    channel = r[0] if groups == 1 else call("floordiv", i[1], idx(mg)) * idx(per) + r[0]
    w_index = [channel, i[1] if groups == 1 else call("floormod", i[1], idx(mg)), *w_at]
    body: Expr = widened(load(0, x, [i[0], channel, *x_at], pad=scalar(0, x.dtype).value)) * widened(load(1, w, w_index))
    shape = (n, mg * groups, *(len(range(p, o, s)) for p, o, s in zip(phase, out, strides, strict=True)))
    return emit_conv(cx, shape, body, x, w, bias, [per, *counts])


def _interleave(cx: OpContext, phases: dict[tuple[int, ...], Value], strides: Sequence[int],
                shape: tuple[int, ...]) -> Value:
    """Output o of each spatial axis from phase o mod s at o div s."""
    nd = len(strides)
    if len(phases) == math.prod(strides) and all(o % s == 0 for o, s in zip(shape[2:], strides, strict=True)):
        return interleave_phases(cx, phases, strides, shape)
    i = out_index(len(shape))
    at = [i[0], i[1], *(call("floordiv", i[2 + d], idx(strides[d])) for d in range(nd))]
    position = [call("floormod", i[2 + d], idx(strides[d])) for d in range(nd)]
    # other phases' indices run past their ends: padded loads keep them in bounds
    value = phase_select(phases, at, position, padded=True)
    return cx.emit(compute(shape, value, list(phases.values())), list(phases.values()))
