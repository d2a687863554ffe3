"""GridSample: each output samples the input at a position read from the grid.

The interpolation taps become reduce axes (2 per dim for linear, 4 for cubic;
none for nearest) and the tap positions data-dependent indices; zeros
padding is a padded load, border and reflection move the index.
"""

from __future__ import annotations

from compiler.frontend.exprs import clamp, compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.ir.dtypes import INDEX, dtype
from compiler.ir.te import Expr, call, cast, select

_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}
_CUBIC_A = -0.75


def _reflect(x: Expr, lo: float, hi: float) -> Expr:
    """Fold a coordinate back into [lo, hi] by reflecting at the borders (repeatedly)."""
    span = scalar(hi - lo, x)

    def fold(dx: Expr, near: float, far: float) -> Expr:
        n = call("floor", dx / span)
        r = dx - n * span
        even = call("eq", call("fmod", n, scalar(2.0, x)), scalar(0.0, x))
        sign = 1.0 if near == lo else -1.0
        return select(even, scalar(near, x) + scalar(sign, x) * r, scalar(far, x) - scalar(sign, x) * r)

    below = fold(scalar(lo, x) - x, lo, hi)
    above = fold(x - scalar(hi, x), hi, lo)
    return select(call("lt", x, scalar(lo, x)), below, select(call("gt", x, scalar(hi, x)), above, x))


def _cubic_weight(t: Expr, tap: Expr) -> Expr:
    """Keys' cubic convolution weight of tap 0..3 at fractional offset t."""
    a = _CUBIC_A

    def near(s: Expr) -> Expr:
        return ((scalar(a + 2, s) * s - scalar(a + 3, s)) * s * s) + scalar(1.0, s)

    def far(s: Expr) -> Expr:
        return ((scalar(a, s) * s - scalar(5 * a, s)) * s + scalar(8 * a, s)) * s - scalar(4 * a, s)

    one = scalar(1.0, t)
    weights = [far(t + one), near(t), near(one - t), far(scalar(2.0, t) - t)]
    out = weights[3]
    for k in (2, 1, 0):
        out = select(call("eq", tap, idx(k)), weights[k], out)
    return out


@lowering("GridSample")
def grid_sample(cx: OpContext) -> Outputs:
    x, grid = cx.input(0), cx.input(1)
    if not dtype(x.dtype).is_float:
        raise cx.unsupported(f"element type {x.dtype}")
    k = x.rank - 2
    if grid.rank != k + 2 or grid.shape[-1] != k or grid.shape[0] != x.shape[0]:
        raise cx.error(f"grid {list(grid.shape)} does not fit input {list(x.shape)}")
    mode = _MODES.get(cx.attr("mode", "linear" if cx.opset >= 20 else "bilinear"))
    padding = cx.attr("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise cx.unsupported(f"mode {cx.attr('mode')!r} with padding {padding!r}")
    aligned = bool(cx.attr("align_corners", 0))
    spatial = x.shape[2:]
    shape = (*x.shape[:2], *grid.shape[1:-1])
    i = out_index(len(shape))
    taps = {"nearest": 0, "linear": 2, "cubic": 4}[mode]
    r = reduce_index(k) if taps else []
    at: list[Expr] = [i[0], i[1]]
    weight: Expr | None = None
    for d, n in enumerate(spatial):
        g = load(1, grid, [i[0], *i[2:], idx(k - 1 - d)])  # the grid lists coordinates innermost first
        one = scalar(1.0, g)
        pos = (g + one) * scalar((n - 1) / 2, g) if aligned else ((g + one) * scalar(n, g) - one) / scalar(2.0, g)
        if mode == "nearest":
            pos = call("round", pos)  # half to even
        lo, hi = (0.0, n - 1.0) if aligned else (-0.5, n - 0.5)
        # like PyTorch (whose models these are), cubic moves only its taps, not the position
        if padding == "border" and mode != "cubic":
            outside = call("or", call("lt", pos, scalar(lo, g)), call("gt", pos, scalar(hi, g)))
            pos = select(outside, call("min", call("max", pos, scalar(0.0, g)), scalar(n - 1.0, g)), pos)
        elif padding == "reflection" and mode != "cubic":
            pos = _reflect(pos, lo, hi)
        if taps:
            base = call("floor", pos)
            t = pos - base
            tap = cast(base, INDEX) + r[d] - idx(taps // 2 - 1)
            w = _cubic_weight(t, r[d]) if mode == "cubic" else select(call("eq", r[d], idx(0)), one - t, t)
            weight = w if weight is None else weight * w
        else:
            tap = cast(pos, INDEX)
        if padding == "border":
            tap = clamp(tap, 0, n - 1)
        elif padding == "reflection":
            tap = clamp(cast(_reflect(cast(tap, g.dtype), lo, hi), INDEX), 0, n - 1)
        at.append(tap)
    value = load(0, x, at, pad=0.0 if padding == "zeros" else None)
    body = value if weight is None else value * weight
    c = compute(shape, body, [x, grid], reduce=[taps] * k if taps else [], reduce_op="sum" if taps else None)
    return [cx.emit(c, [x, grid])]


