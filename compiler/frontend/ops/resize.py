"""Resize and Upsample. Scales and sizes are constants, so the source position of
every output coordinate is worked out here, per resized axis, as small tables
(tap indices and weights) that the kernel reads; an integer nearest-neighbour
factor becomes plain index arithmetic instead."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compiler.frontend.exprs import clamp, compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import dtype
from compiler.ir.te import ACC, Expr, Var, call, select
from compiler.ir.zipped import ZIPPED_WIDTHS, zips


@dataclass(frozen=True)
class ResizeMode:
    """The attributes that decide where an output coordinate samples the input."""

    mode: str
    coordinates: str
    nearest: str
    cubic_a: float
    exclude_outside: bool
    antialias: bool


@dataclass
class AxisTaps:
    """For one resized axis: input index and weight of each tap of each output coordinate."""

    index: np.ndarray  # int64 [out, taps]
    weight: np.ndarray  # float64 [out, taps]
    outside: np.ndarray | None  # bool [out]: tf_crop_and_resize extrapolation


def _source(m: ResizeMode, n_out: int, n_in: int, scale: float, roi: tuple[float, float]
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """Input coordinate of each output coordinate (ONNX coordinate_transformation_mode)."""
    y = np.arange(n_out, dtype=np.float64)
    length = scale * n_in
    c = m.coordinates
    if c == "asymmetric":
        return y / scale, None
    if c == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if c == "pytorch_half_pixel":
        return (np.full(n_out, -0.5) if length == 1 else (y + 0.5) / scale - 0.5), None
    if c == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (y + 0.5) / scale - 0.5, None
    if c == "align_corners":
        return (np.zeros(n_out) if length == 1 else y * (n_in - 1) / (length - 1)), None
    if c == "tf_crop_and_resize":
        lo, hi = roi
        if length == 1:
            x = np.full(n_out, (hi - lo) * (n_in - 1) / 2)
        else:
            x = y * (hi - lo) * (n_in - 1) / (length - 1)
        x = x + lo * (n_in - 1)
        return x, (x < 0) | (x > n_in - 1)
    raise ValueError(f"coordinate_transformation_mode {c!r}")


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """The cubic convolution kernel at distances t."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _coefficients(m: ResizeMode, ratio: np.ndarray, scale: float) -> np.ndarray:
    """Tap weights [out, taps] for the fractional offsets `ratio` in (0, 1]."""
    r = ratio[:, None]
    if m.mode == "nearest":
        whole = ratio == 1.0
        right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                 "floor": np.zeros_like(whole), "ceil": np.ones_like(whole)}[m.nearest] | whole
        return np.stack([~right, right], axis=1).astype(np.float64)
    support = 1.0 if m.mode == "linear" else 2.0
    if m.antialias and scale < 1:
        first = math.floor(-support / scale) + 1
        offsets = np.arange(first, 2 - first)[None, :] - r
        w = np.clip(1 - np.abs(offsets * scale), 0, 1) if m.mode == "linear" else _cubic(offsets * scale, m.cubic_a)
        return w / w.sum(axis=1, keepdims=True)
    offsets = np.arange(1 - int(support), 1 + int(support))[None, :] - r
    return np.clip(1 - np.abs(offsets), 0, 1) if m.mode == "linear" else _cubic(offsets, m.cubic_a)


def axis_taps(m: ResizeMode, n_in: int, n_out: int, scale: float, roi: tuple[float, float]) -> AxisTaps:
    x, outside = _source(m, n_out, n_in, scale, roi)
    floor = np.floor(x)
    ratio = np.where(x == floor, 1.0, x - floor)
    w = _coefficients(m, ratio, scale)
    taps = w.shape[1]
    # the `taps` nearest inputs, ties to the smaller index: the window starts at ceil(x) - taps/2
    start = np.ceil(x).astype(np.int64) - taps // 2
    index = start[:, None] + np.arange(taps)[None, :]
    if m.exclude_outside:
        w = np.where((index < 0) | (index >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    index = np.clip(index, 0, n_in - 1)
    if m.mode == "nearest":  # keep only the chosen tap
        pick = np.argmax(w, axis=1)
        index, w = index[np.arange(n_out), pick][:, None], np.ones((n_out, 1))
    return AxisTaps(index, w, outside if outside is not None and outside.any() else None)


def _affine_index(table: np.ndarray, i: Expr) -> Expr | None:
    """`i // k` or `i * k` when the single-tap table is exactly that (integer rescaling)."""
    t = table[:, 0]
    o = np.arange(len(t))
    for k in range(1, 17):
        if np.array_equal(t, o // k):
            return call("floordiv", i, idx(k)) if k > 1 else i
        if np.array_equal(t, o * k):
            return i * idx(k)
    return None


def _repeated_columns(index: Expr, i: Expr, n_out: int, n_in: int, element: str) -> int | None:
    """k where the innermost axis reads input column `i // k` (an integer nearest-neighbour
    upsampling whose k repeats of `element` values the backend zips) and the output is
    exactly k times the input; else None."""
    for k in ZIPPED_WIDTHS:
        if zips(element, k) and n_out == k * n_in and index == call("floordiv", i, idx(k)):
            return k
    return None


def resize_values(cx: OpContext, x: Value, out_shape: Sequence[int], scales: Sequence[float],
                  m: ResizeMode, roi: Sequence[tuple[float, float]]) -> Value:
    """x resampled to `out_shape` (one Compute; tap tables are its extra inputs)."""
    if m.mode != "nearest" and not dtype(x.dtype).is_float:
        # nearest only picks elements; interpolating integers would need a rounding rule
        raise cx.unsupported(f"{m.mode} interpolation of element type {x.dtype}")
    i = out_index(x.rank)
    inputs: list[Value] = [x]
    at: list[Expr] = list(i)
    weights: list[Expr] = []
    outside: list[Expr] = []
    reduce: list[int] = []
    for d in range(x.rank):
        identity = out_shape[d] == x.shape[d] and math.isclose(scales[d], 1.0) and roi[d] == (0.0, 1.0)
        if identity:
            continue
        taps = axis_taps(m, x.shape[d], out_shape[d], scales[d], roi[d])
        if taps.outside is not None:
            outside.append(load(len(inputs), cx.constant(taps.outside), [i[d]]))
            inputs.append(cx.constant(taps.outside))
        if taps.index.shape[1] == 1:
            affine = _affine_index(taps.index, i[d])
            if affine is not None:
                at[d] = affine
                continue
            table = cx.constant(taps.index)
            at[d] = clamp(load(len(inputs), table, [i[d], idx(0)]), 0, x.shape[d] - 1)
            inputs.append(table)
            continue
        (r,) = reduce_index(len(reduce) + 1)[-1:]
        reduce.append(taps.index.shape[1])
        table, w = cx.constant(taps.index), cx.constant(taps.weight.astype(dtype(x.dtype).np_type))
        # the tables hold in-range indices; clamped anyway, as every index a kernel reads from data is
        at[d] = clamp(load(len(inputs), table, [i[d], r]), 0, x.shape[d] - 1)
        weights.append(load(len(inputs) + 1, w, [i[d], r]))
        inputs += [table, w]
    picked = not (reduce or outside)  # each output element one input element
    repeat = _repeated_columns(at[-1], i[-1], out_shape[-1], x.shape[-1], x.dtype) if picked else None
    if repeat is not None:
        # each input column written `repeat` times side by side: computed over [..., w, repeat]
        # (the body reads column w whatever the position) and viewed as the output, so the
        # kernel loads whole vectors of the row and zips them with themselves
        # (compiler/ir/zipped.py) instead of gathering one lane at a time
        at[-1] = i[-1]
        c = compute([*out_shape[:-1], x.shape[-1], repeat], load(0, x, at), inputs)
        return cx.view(cx.emit(c, inputs), out_shape)
    body: Expr = load(0, x, at)
    for w_expr in weights:
        body = body * w_expr
    acc: Expr = Var(ACC, body.dtype) if reduce else body
    post = None
    if outside:
        hit = outside[0]
        for o in outside[1:]:
            hit = call("or", hit, o)
        extrapolated = select(hit, scalar(float(cx.attr("extrapolation_value", 0.0)), body), acc)
        if reduce:
            post = extrapolated
        else:
            body = extrapolated
    c = compute(out_shape, body, inputs, reduce=reduce, reduce_op="sum" if reduce else None, post=post)
    return cx.emit(c, inputs)


def _mode(cx: OpContext, legacy: bool) -> ResizeMode:
    mode = cx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise cx.unsupported(f"mode {mode!r}")
    return ResizeMode(
        mode=mode,
        coordinates="asymmetric" if legacy else cx.attr("coordinate_transformation_mode", "half_pixel"),
        nearest="floor" if legacy else cx.attr("nearest_mode", "round_prefer_floor"),
        cubic_a=float(cx.attr("cubic_coeff_a", -0.75)),
        exclude_outside=bool(cx.attr("exclude_outside", 0)),
        antialias=bool(cx.attr("antialias", 0)),
    )


@lowering("Upsample")
def upsample(cx: OpContext) -> Outputs:
    x = cx.input(0)
    scales = [float(s) for s in (cx.attr("scales") or np.asarray(cx.const_input(1, "scales")).reshape(-1))]
    out = [math.floor(n * s) for n, s in zip(x.shape, scales, strict=True)]
    return [resize_values(cx, x, out, scales, _mode(cx, legacy=True), [(0.0, 1.0)] * x.rank)]


@lowering("Resize")
def resize(cx: OpContext) -> Outputs:
    x = cx.input(0)
    r = x.rank
    if cx.opset < 11:
        scales_in, sizes_in, roi_in = cx.const_input(1, "scales"), None, None
    else:
        roi_in, scales_in, sizes_in = (cx.const_input(k, n) for k, n in ((1, "roi"), (2, "scales"), (3, "sizes")))
    axes = [cx.axis(a, r) for a in cx.attr("axes", range(r))]
    m = _mode(cx, legacy=cx.opset < 11)
    scales, out = [1.0] * r, list(x.shape)
    if sizes_in is not None and np.asarray(sizes_in).size:
        sizes = [int(s) for s in np.asarray(sizes_in).reshape(-1)]
        for a, s in zip(axes, sizes, strict=True):
            scales[a], out[a] = s / x.shape[a], s
        policy = cx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            scale = pick(scales[a] for a in axes)
            for a in axes:
                scales[a], out[a] = scale, int(scale * x.shape[a] + 0.5)
    elif scales_in is not None and np.asarray(scales_in).size:
        for a, s in zip(axes, np.asarray(scales_in).reshape(-1), strict=True):
            scales[a], out[a] = float(s), math.floor(float(s) * x.shape[a])
    else:
        raise cx.error("neither scales nor sizes is given")
    roi = [(0.0, 1.0)] * r
    if m.coordinates == "tf_crop_and_resize":
        flat = [float(v) for v in np.asarray(roi_in if roi_in is not None else []).reshape(-1)]
        if len(flat) != 2 * len(axes):
            raise cx.error("tf_crop_and_resize needs a constant roi of 2 x len(axes) values")
        for k, a in enumerate(axes):
            roi[a] = (flat[k], flat[len(axes) + k])
    return [resize_values(cx, x, out, scales, m, roi)]
