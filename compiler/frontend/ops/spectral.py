"""DFT and STFT as direct sums (one reduce Compute each): the twiddle angle
2*pi*((k*n) mod N)/N is index arithmetic, so no tables are needed."""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import dtype
from compiler.ir.te import ACC, Expr, Var, call, cast, select


def _const_int(cx: OpContext, i: int, what: str) -> int | None:
    v = cx.const_input(i, what)
    return None if v is None else int(np.asarray(v).reshape(-1)[0])


def _twiddle(k: Expr, n: Expr, length: int, dt: str) -> tuple[Expr, Expr]:
    """cos and sin of 2*pi*k*n/length, taken in float64 so that sin(pi) is ~1e-16, not float32's ~1e-7."""
    angle = cast(call("floormod", k * n, idx(length)), "float64") * scalar(2 * math.pi / length, "float64")
    return cast(call("cos", angle), dt), cast(call("sin", angle), dt)


def _parts(x: Value, at: list[Expr], pad: bool) -> tuple[Expr, Expr]:
    """Real and imaginary part of x[at] (a real signal has a last dim of 1)."""
    re = load(0, x, [*at, idx(0)], pad=0.0 if pad else None)
    im = load(0, x, [*at, idx(1)], pad=0.0 if pad else None) if x.shape[-1] == 2 else scalar(0, re)
    return re, im


@lowering("DFT")
def dft(cx: OpContext) -> Outputs:
    x = cx.input(0)
    if not dtype(x.dtype).is_float or x.shape[-1] not in (1, 2):
        raise cx.error(f"input {x.dtype}{list(x.shape)} is not a real or complex signal")
    axis = cx.attr("axis", 1) if cx.opset < 20 else (_const_int(cx, 2, "axis") if cx.optional(2) else -2)
    axis = cx.axis(axis, x.rank)
    inverse, onesided = bool(cx.attr("inverse", 0)), bool(cx.attr("onesided", 0))
    given = _const_int(cx, 1, "dft_length")
    length = given if given is not None else (2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis])
    bins = length // 2 + 1 if onesided and not inverse else length
    real_out = inverse and onesided
    shape = (*x.shape[:axis], bins, *x.shape[axis + 1:-1], 1 if real_out else 2)
    i = out_index(len(shape))
    (n,) = reduce_index(1)
    k = i[axis]
    cos, sin = _twiddle(k, n, length, x.dtype)
    if real_out:  # one-sided spectrum: the upper half mirrors the lower (Hermitian)
        half = length // 2 + 1
        lower = call("lt", n, idx(half))
        mirrored = select(lower, n, idx(length) - n)
        re, im = _parts(x, [*i[:axis], mirrored, *i[axis + 1:-1]], pad=True)
        im = select(lower, im, -im)
        body = re * cos - im * sin
    else:
        re, im = _parts(x, [*i[:axis], n, *i[axis + 1:-1]], pad=True)
        sign = -1.0 if inverse else 1.0  # forward: e^{-i theta}
        real = re * cos + scalar(sign, re) * im * sin
        imag = im * cos - scalar(sign, re) * re * sin
        body = select(call("eq", i[-1], idx(0)), real, imag)
    post = Var(ACC, body.dtype) / scalar(length, body) if inverse else None
    return [cx.emit(compute(shape, body, [x], reduce=[length], reduce_op="sum", post=post), [x])]


@lowering("STFT")
def stft(cx: OpContext) -> Outputs:
    x, window = cx.input(0), cx.optional(2)
    step = _const_int(cx, 1, "frame_step")
    length = _const_int(cx, 3, "frame_length")
    if length is None:
        if window is None:
            raise cx.error("needs a window or a frame_length")
        length = window.shape[0]
    if step is None or step < 1 or x.rank != 3:
        raise cx.error("needs a positive constant frame_step and a [batch, length, 1|2] signal")
    frames = (x.shape[1] - length) // step + 1
    bins = length // 2 + 1 if cx.attr("onesided", 1) else length
    shape = (x.shape[0], frames, bins, 2)
    b, f, k, c = out_index(4)
    (n,) = reduce_index(1)
    re, im = _parts(x, [b, f * idx(step) + n], pad=False)
    inputs = [x]
    if window is not None:
        w = load(1, window, [n])
        re, im = re * w, im * w
        inputs.append(window)
    cos, sin = _twiddle(k, n, length, x.dtype)
    body = select(call("eq", c, idx(0)), re * cos + im * sin, im * cos - re * sin)
    return [cx.emit(compute(shape, body, inputs, reduce=[length], reduce_op="sum"), inputs)]
