"""RoiAlign: each output bin averages (or maxes) bilinear samples of its region of interest.

Reduce axes run over the sampling grid (sampling_ratio per dim) and the two
bilinear corners per dim; the region's corners are read from `rois` at run time.
"""

from __future__ import annotations

from compiler.frontend.exprs import clamp, compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.movement import element_index
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.ir.dtypes import INDEX, dtype
from compiler.ir.te import ACC, Expr, Var, call, cast, select


def _axis_sample(rois_at, lo_col: int, hi_col: int, scale: float, offset: float, aligned: bool, bins: int,
                 p: Expr, s: Expr, corner: Expr, ratio: int, size: int) -> tuple[Expr, Expr, Expr]:
    """(inside, weight, index) of one bilinear corner of one sample along one spatial dim."""
    start = rois_at(lo_col) * scalar(scale, "float32") - scalar(offset, "float32")
    extent = rois_at(hi_col) * scalar(scale, "float32") - scalar(offset, "float32") - start
    if not aligned:
        extent = call("max", extent, scalar(1.0, extent))
    step = extent / scalar(bins, extent)
    pos = start + cast(p, "float32") * step + (cast(s, "float32") + scalar(0.5, step)) * step / scalar(ratio, step)
    inside = call("and", call("ge", pos, scalar(-1.0, pos)), call("le", pos, scalar(float(size), pos)))
    pos = call("max", pos, scalar(0.0, pos))
    low = cast(call("floor", pos), INDEX)
    at_end = call("ge", low, idx(size - 1))
    low = select(at_end, idx(size - 1), low)
    frac = select(at_end, scalar(0.0, pos), pos - cast(low, "float32"))
    weight = select(call("eq", corner, idx(0)), scalar(1.0, frac) - frac, frac)
    index = select(call("and", call("eq", corner, idx(1)), call("not", at_end)), low + idx(1), low)
    return inside, weight, clamp(index, 0, size - 1)  # NaN coordinates must not read out of bounds


@lowering("RoiAlign")
def roi_align(cx: OpContext) -> Outputs:
    x, rois, batch = cx.input(0), cx.input(1), cx.input(2)
    if x.rank != 4 or x.dtype != "float32" or not dtype(rois.dtype).is_float:
        raise cx.unsupported(f"input {x.dtype}{list(x.shape)} (float32 N x C x H x W is supported)")
    ratio = int(cx.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise cx.unsupported("data-dependent shape: sampling_ratio 0 samples a per-region number of points")
    oh, ow = int(cx.attr("output_height", 1)), int(cx.attr("output_width", 1))
    aligned = cx.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    scale = float(cx.attr("spatial_scale", 1.0))
    offset = 0.5 if aligned else 0.0
    r, c, ph, pw = out_index(4)
    sy, sx, cy, cxr = reduce_index(4)

    def rois_at(col: int) -> Expr:
        return cast(load(1, rois, [r, idx(col)]), "float32")

    in_y, w_y, y = _axis_sample(rois_at, 1, 3, scale, offset, aligned, oh, ph, sy, cy, ratio, x.shape[2])
    in_x, w_x, xi = _axis_sample(rois_at, 0, 2, scale, offset, aligned, ow, pw, sx, cxr, ratio, x.shape[3])
    n = element_index(load(2, batch, [r]), x.shape[0])
    value = w_y * w_x * load(0, x, [n, c, y, xi])
    body = select(call("and", in_y, in_x), value, scalar(0.0, value))
    mode = cx.attr("mode", "avg")
    post = Var(ACC, "float32") / scalar(ratio * ratio, "float32") if mode == "avg" else None
    shape = (rois.shape[0], x.shape[1], oh, ow)
    c_ = compute(shape, body, [x, rois, batch], reduce=[ratio, ratio, 2, 2], reduce_op="sum" if mode == "avg" else "max",
                 post=post)
    return [cx.emit(c_, [x, rois, batch])]
