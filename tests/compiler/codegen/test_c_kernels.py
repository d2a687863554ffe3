"""Generated C kernels agree with the TE interpreter: hand-built Computes for every
loop structure (element-wise, register micro-tiles with remainders, row reductions),
padded and data-dependent loads, 0-d and empty outputs, several dtypes."""

from __future__ import annotations

import math
import platform
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary, listing, render_planned

from compiler.codegen.c.kernel import render_kernel
from compiler.codegen.c.stage import NO_COPY_CALLS, stage_padded_loads
from compiler.codegen.c.vector_math import exp_function
from compiler.codegen.c.workarounds import NO_IF_CONVERT
from compiler.ir import te
from compiler.ir.interp import evaluate
from compiler.ir.te import Axis, Compute, Load, TensorType, Var, call, cast, select
from compiler.schedule.merge_axes import merge_reduce_axes
from compiler.schedule.plan import TileConfig
from compiler.schedule.row_reduction import reduces_rows
from compiler.schedule.stage_block import staged_block
from compiler.schedule.tiling import default_tile
from compiler.target.base import Target

RNG = np.random.default_rng(7)
CPU = Target(name="cpu", kind="cpu", arch="x86_64", levels=(), units=2, lanes=8, banks=1,
             registers=16, peak_flops={})

i0, i1, i2, i3 = Var("i0"), Var("i1"), Var("i2"), Var("i3")
r0, r1, r2 = Var("r0"), Var("r1"), Var("r2")


def axes(*extents: int, prefix: str = "i") -> tuple[Axis, ...]:
    return tuple(Axis(f"{prefix}{k}", e) for k, e in enumerate(extents))


def rand(shape: tuple[int, ...], dt: str = "float32") -> np.ndarray:
    if dt.startswith("float"):
        return RNG.standard_normal(shape).astype(dt)
    if dt == "bool":
        return RNG.random(shape) < 0.5
    info = np.iinfo(dt)
    return RNG.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dt)


def matmul(m: int, n: int, k: int, dt: str = "float32") -> Compute:
    return Compute(axes(m, n), Load(0, (i0, r0), dt) * Load(1, (r0, i1), dt),
                   (TensorType((m, k), dt), TensorType((k, n), dt)), dt,
                   axes(k, prefix="r"), "sum", label="MatMul")


def linear_relu(m: int, n: int, k: int) -> Compute:
    """relu(x @ w + b): an epilogue reading an input in `post`."""
    post = call("max", Var("acc", "float32") + Load(2, (i1,), "float32"), 0.0)
    return Compute(axes(m, n), Load(0, (i0, r0), "float32") * Load(1, (r0, i1), "float32"),
                   (TensorType((m, k), "float32"), TensorType((k, n), "float32"), TensorType((n,), "float32")),
                   "float32", axes(k, prefix="r"), "sum", post, "MatMul+Add+Relu")


def column_max(rows: int, cols: int) -> Compute:
    return Compute(axes(cols), Load(0, (r0, i0), "float32"), (TensorType((rows, cols), "float32"),),
                   "float32", axes(rows, prefix="r"), "max")


def batched_matmul_broadcast() -> Compute:
    # A (2,1,5,7) @ B (3,7,9) -> (2,3,5,9)
    body = Load(0, (i0, te.const(0, "int64"), i2, r0), "float32") * Load(1, (i1, r0, i3), "float32")
    return Compute(axes(2, 3, 5, 9), body, (TensorType((2, 1, 5, 7), "float32"),
                   TensorType((3, 7, 9), "float32")), "float32", axes(7, prefix="r"), "sum")


def conv2d(stride: int, dilation: int, pad: int, h: int = 11, w: int = 10) -> Compute:
    """x (1,3,h,w) * w (4,3,3,3) + bias, relu; padding through padded loads."""
    n, c, co, k = 1, 3, 4, 3
    oh = (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    x = Load(0, (i0, r0, i2 * stride + r1 * dilation - pad, i3 * stride + r2 * dilation - pad),
             "float32", pad=0.0)
    body = x * Load(1, (i1, r0, r1, r2), "float32")
    post = call("max", Var("acc", "float32") + Load(2, (i1,), "float32"), 0.0)
    return Compute(axes(n, co, oh, ow), body, (TensorType((n, c, h, w), "float32"),
                   TensorType((co, c, k, k), "float32"), TensorType((co,), "float32")),
                   "float32", axes(c, k, k, prefix="r"), "sum", post, "Conv+Relu")


def depthwise() -> Compute:
    x = Load(0, (i0, i1, i2 + r0 - 1, i3 + r1 - 1), "float32", pad=0.0)
    return Compute(axes(1, 4, 9, 9), x * Load(1, (i1, te.const(0, "int64"), r0, r1), "float32"),
                   (TensorType((1, 4, 9, 9), "float32"), TensorType((4, 1, 3, 3), "float32")),
                   "float32", axes(3, 3, prefix="r"), "sum")


def depthwise_wide(channels: int = 8, side: int = 64) -> Compute:
    """A depthwise conv whose whole-map block is too big to stage in one task (c/stage.py)."""
    x = Load(0, (i0, i1, i2 + r0 - 1, i3 + r1 - 1), "float32", pad=0.0)
    return Compute(axes(1, channels, side, side), x * Load(1, (i1, te.const(0, "int64"), r0, r1), "float32"),
                   (TensorType((1, channels, side, side), "float32"), TensorType((channels, 1, 3, 3), "float32")),
                   "float32", axes(3, 3, prefix="r"), "sum")


def depthwise_epilogue() -> Compute:
    """Depthwise conv + bias (broadcast along the vector axis) + residual (contiguous),
    then LeakyReLU (a select on a comparison): all of it on the explicit-SIMD path."""
    x = Load(0, (i0, i1, i2 + r0 - 1, i3 + r1 - 1), "float32", pad=0.0)
    v = Var("acc", "float32") + Load(2, (i1,), "float32") + Load(0, (i0, i1, i2, i3), "float32")
    post = select(call("lt", v, 0.0), v * 0.1, v)
    return Compute(axes(1, 3, 6, 24), x * Load(1, (i1, te.const(0, "int64"), r0, r1), "float32"),
                   (TensorType((1, 3, 6, 24), "float32"), TensorType((3, 1, 3, 3), "float32"),
                    TensorType((3,), "float32")), "float32", axes(3, 3, prefix="r"), "sum", post)


def column_sum(rows: int, depth: int, cols: int, dt: str = "float32", post=None) -> Compute:
    """Sum over the middle axis of (rows, depth, cols): the output's inner axis is contiguous."""
    return Compute(axes(rows, cols), Load(0, (i0, r0, i1), dt), (TensorType((rows, depth, cols), dt),), dt,
                   axes(depth, prefix="r"), "sum", post)


def _column_nans() -> list[np.ndarray]:
    x = rand((4, 150, 32))
    x[1, 7, 3] = np.nan
    return [x]


def maxpool(h: int = 11, w: int = 9) -> Compute:
    """3x3 windows, stride 2, padding 1 read as -inf."""
    x = Load(0, (i0, i1, i2 * 2 + r0 - 1, i3 * 2 + r1 - 1), "float32", pad=-math.inf)
    return Compute(axes(1, 3, (h - 1) // 2 + 1, (w - 1) // 2 + 1), x, (TensorType((1, 3, h, w), "float32"),),
                   "float32", axes(3, 3, prefix="r"), "max")


def depthwise_stride2(side: int = 37) -> Compute:
    x = Load(0, (i0, i1, i2 * 2 + r0 - 1, i3 * 2 + r1 - 1), "float32", pad=0.0)
    out = (side - 1) // 2 + 1
    return Compute(axes(1, 4, out, out), x * Load(1, (i1, te.const(0, "int64"), r0, r1), "float32"),
                   (TensorType((1, 4, side, side), "float32"), TensorType((4, 1, 3, 3), "float32")),
                   "float32", axes(3, 3, prefix="r"), "sum")


def _nan_map(shape: tuple[int, ...]) -> Callable[[], list[np.ndarray]]:
    """Random values with a few NaNs (a max window must give NaN where it holds one)."""
    def make() -> list[np.ndarray]:
        x = rand(shape)
        x.reshape(-1)[RNG.choice(x.size, 5, replace=False)] = np.nan
        return [x]
    return make


def row_reduce(op: str, rows: int, cols: int, dt: str = "float32", post=None) -> Compute:
    return Compute(axes(rows), Load(0, (i0, r0), dt), (TensorType((rows, cols), dt),), dt,
                   axes(cols, prefix="r"), op, post)


def softmax_exp_sum(rows: int, cols: int) -> Compute:
    """sum_r exp(x[i, r] - m[i]) with the row max as input 1."""
    body = call("exp", Load(0, (i0, r0), "float32") - Load(1, (i0,), "float32"))
    return Compute(axes(rows), body, (TensorType((rows, cols), "float32"),
                   TensorType((rows,), "float32")), "float32", axes(cols, prefix="r"), "sum")


def softmax_divide(rows: int, cols: int) -> Compute:
    body = call("exp", Load(0, (i0, i1), "float32") - Load(1, (i0,), "float32")) / Load(2, (i0,), "float32")
    return Compute(axes(rows, cols), body, (TensorType((rows, cols), "float32"),
                   TensorType((rows,), "float32"), TensorType((rows,), "float32")), "float32")


def exp_of(rows: int, cols: int) -> Compute:
    """exp(x) element-wise: the explicit-SIMD path with the inlined vector exp."""
    return Compute(axes(rows, cols), call("exp", Load(0, (i0, i1), "float32")),
                   (TensorType((rows, cols), "float32"),), "float32")


def masked_exp(rows: int, cols: int) -> Compute:
    """exp(x) where column > row + 2 and a per-row flag holds, else -x: selects on an index
    comparison along the vector (lane indices) and on a condition the same in every lane."""
    x = Load(0, (i0, i1), "float32")
    later = select(call("gt", i1, i0 + 2), call("exp", x), -x)
    return Compute(axes(rows, cols), select(Load(1, (i0,), "bool"), later, x * 2.0),
                   (TensorType((rows, cols), "float32"), TensorType((rows,), "bool")), "float32")


def log_sum_exp(rows: int, cols: int) -> Compute:
    """log(sum_r exp(x[i, r])): a vector row reduction with exp in its body, post scalar."""
    return Compute(axes(rows), call("exp", Load(0, (i0, r0), "float32")), (TensorType((rows, cols), "float32"),),
                   "float32", axes(cols, prefix="r"), "sum", call("log", Var("acc", "float32")))


def row_dot_gelu(rows: int, cols: int, depth: int) -> Compute:
    """x[i, r] . w[j, r] then GELU(erf): a row-dot GEMM (both operands contiguous along r)
    whose epilogue runs on vectors of outputs along j."""
    x, w = Load(0, (i0, r0), "float32"), Load(1, (i1, r0), "float32")
    acc = Var("acc", "float32")
    post = acc * 0.5 * (call("erf", acc * 0.7071067811865476) + 1.0)
    return Compute(axes(rows, cols), x * w, (TensorType((rows, depth), "float32"), TensorType((cols, depth), "float32")),
                   "float32", axes(depth, prefix="r"), "sum", post)


# exp's special inputs: overflow to inf, underflow through the denormals to 0, NaN, +-0
EXP_SPECIALS = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 88.72, 88.73, 89.0, 100.0, -87.33, -88.0,
                         -100.0, -103.9, -104.0, -150.0, 1e-30, -1e-30, 0.5, -0.5, 1e-45], np.float32)


def _exp_inputs(rows: int, cols: int) -> Callable[[], list[np.ndarray]]:
    """A sweep of [-110, 110] with the special values spread over whole vectors and tails."""
    def make() -> list[np.ndarray]:
        x = np.linspace(-110, 110, rows * cols, dtype=np.float32)
        x[RNG.choice(x.size, EXP_SPECIALS.size, replace=False)] = EXP_SPECIALS
        return [x.reshape(rows, cols)]
    return make


def mean_middle_axis() -> Compute:
    # mean over axis 1 of (6, 40, 3): the innermost output axis is contiguous
    return Compute(axes(6, 3), Load(0, (i0, r0, i1), "float32"), (TensorType((6, 40, 3), "float32"),),
                   "float32", axes(40, prefix="r"), "sum", Var("acc", "float32") / 40.0, "ReduceMean")


def global_average_pool(channels: int = 12, h: int = 7, w: int = 9) -> Compute:
    """Mean over (h, w): two reduce axes that merge into one contiguous row."""
    return Compute(axes(1, channels), Load(0, (i0, i1, r0, r1), "float32"),
                   (TensorType((1, channels, h, w), "float32"),), "float32", axes(h, w, prefix="r"), "sum",
                   Var("acc", "float32") / float(h * w), "GlobalAveragePool")


def gather() -> Compute:
    # data (7, 5)[indices (4,)], negative indices wrap like ONNX Gather
    idx = Load(1, (i0,), "int64")
    idx = select(call("lt", idx, 0), idx + 7, idx)
    return Compute(axes(4, 5), Load(0, (idx, i1), "float32"),
                   (TensorType((7, 5), "float32"), TensorType((4,), "int64")), "float32")


def elementwise_float() -> Compute:
    """select / cast / comparisons chain: elu, then clipped, through int and back."""
    x, y = Load(0, (i0, i1), "float32"), Load(1, (i1,), "float32")
    elu = select(call("gt", x, 0.0), x, call("exp", x) - 1.0)
    z = call("min", call("max", elu * y, -2.5), 2.5)
    as_int = cast(cast(z * 10.0, "int64"), "float32")
    flag = cast(call("and", call("ge", x, y), call("not", call("isnan", x))), "float32")
    return Compute(axes(13, 37), as_int + flag + call("tanh", x) * call("erf", y), (
        TensorType((13, 37), "float32"), TensorType((37,), "float32")), "float32")


def elementwise_int64() -> Compute:
    a, b = Load(0, (i0,), "int64"), Load(1, (i0,), "int64")
    parts = [call("div", a, b), call("mod", a, b), call("fmod", a, b), call("floordiv", a, b),
             call("floormod", a, b), call("bitxor", a, b), call("shl", a, call("bitand", b, 7)),
             call("shr", a, call("bitand", b, 7)), cast(call("lt", a, b), "int64"), call("abs", a) * 3]
    total = parts[0]
    for p in parts[1:]:
        total = total * 31 + p
    return Compute(axes(101), total, (TensorType((101,), "int64"), TensorType((101,), "int64")), "int64")


def elementwise_bool() -> Compute:
    a, b = Load(0, (i0,), "bool"), Load(1, (i0,), "bool")
    return Compute(axes(33), call("xor", call("or", a, b), call("and", a, call("not", b))),
                   (TensorType((33,), "bool"), TensorType((33,), "bool")), "bool")


def scalar_sum() -> Compute:
    return Compute((), Load(0, (r0, r1), "float32"), (TensorType((4, 5), "float32"),),
                   "float32", axes(4, 5, prefix="r"), "sum")


def scalar_elementwise() -> Compute:
    return Compute((), Load(0, (), "float32") * 2.0 + 1.0, (TensorType((), "float32"),), "float32")


def empty_output() -> Compute:
    return Compute(axes(0, 5), Load(0, (i0, i1), "float32") + 1.0, (TensorType((0, 5), "float32"),),
                   "float32")


def empty_reduce(op: str) -> Compute:
    return Compute(axes(3), Load(0, (i0, r0), "float32"), (TensorType((3, 0), "float32"),),
                   "float32", axes(0, prefix="r"), op)


def reduce_no_axes() -> Compute:
    return Compute(axes(6), Load(0, (i0,), "float32"), (TensorType((6,), "float32"),),
                   "float32", (), "max", Var("acc", "float32") * 2.0)


def float16_chain() -> Compute:
    x, y = Load(0, (i0, r0), "float16"), Load(1, (r0,), "float16")
    return Compute(axes(5), x * y + 0.1, (TensorType((5, 24), "float16"), TensorType((24,), "float16")),
                   "float16", axes(24, prefix="r"), "max", call("sqrt", call("abs", Var("acc", "float16"))))


def int_sum_middle() -> Compute:
    return Compute(axes(4, 6), Load(0, (i0, r0, i1), "int32"), (TensorType((4, 9, 6), "int32"),),
                   "int32", axes(9, prefix="r"), "sum")


def any_all(op: str) -> Compute:
    return Compute(axes(5), Load(0, (i0, r0), "bool"), (TensorType((5, 40), "bool"),), "bool",
                   axes(40, prefix="r"), op)


def outer_select(parts: int = 5) -> Compute:
    """A select chain by an outer axis' index (Winograd's input transform picks one signed
    sum per table position): each range of i1 runs its own branch."""
    x = [Load(0, (i0, i1, i2 + k), "float32") for k in range(parts)]
    body = x[0]
    for k in reversed(range(1, parts)):  # i1 < 2: the first branch, i1 < 4: the second, ...
        body = select(call("lt", i1, te.const(k * 2, "int64")), x[k] * float(k) - x[k - 1], body)
    return Compute(axes(3, 2 * parts + 1, 19), body, (TensorType((3, 2 * parts + 1, 19 + parts), "float32"),),
                   "float32")


def half_rotation(half: int = 8) -> Compute:
    """A rotary embedding's half rotation times a table: a Concat along the innermost axis
    of each row's upper half negated and its lower half, each read at a clamped index;
    each range of i2 runs its own branch, its loads affine."""
    zero, top = te.const(0, "int64"), te.const(half - 1, "int64")
    upper = Load(0, (i0, i1, call("min", call("max", i2, zero), top) + half), "float32")
    lower = Load(0, (i0, i1, call("min", call("max", i2 - half, zero), top)), "float32")
    body = select(call("lt", i2, te.const(half, "int64")), -upper, lower) * Load(1, (i1, i2), "float32")
    return Compute(axes(3, 5, 2 * half), body, (TensorType((3, 5, 2 * half), "float32"),
                                                 TensorType((5, 2 * half), "float32")), "float32")


def strided_windows() -> Compute:
    """Element-wise loads at stride 2 with padding on both sides of both axes (Winograd's
    input transform of a padded convolution): the rows' interiors read unchecked."""
    pad = 0.0
    body = (Load(0, (i0, i1 * 2 - 1, i2 * 2 - 1), "float32", pad) + Load(0, (i0, i1 * 2 + 2, i2 * 2 + 2), "float32", pad)
            - Load(0, (i0, i1 * 2, i2 * 2 + 1), "float32", pad))
    return Compute(axes(2, 6, 23), body, (TensorType((2, 11, 46), "float32"),), "float32")


def window_columns() -> Compute:
    """Element-wise loads whose padded column mixes the innermost axis with an outer one
    (Winograd's input transform with its table axes apart reads column b of a tile's window
    at 2 x tile column + b - 1): one unchecked interior for every row."""
    pad = 0.0
    body = Load(0, (i0, i2 * 2 + i1 - 1), "float32", pad) - Load(0, (i0, i2 * 2 + i1 + 1), "float32", pad)
    return Compute(axes(2, 4, 12), body, (TensorType((2, 24), "float32"),), "float32")


Case = tuple[Compute, TileConfig | None, Callable[[], list[np.ndarray]]]


def _inputs(c: Compute) -> Callable[[], list[np.ndarray]]:
    return lambda: [rand(t.shape, t.dtype) for t in c.inputs]


def _case(c: Compute, tile: TileConfig | None = None,
          inputs: Callable[[], list[np.ndarray]] | None = None) -> Case:
    return c, tile, inputs or _inputs(c)


def _softmax_sum_inputs() -> list[np.ndarray]:
    x = rand((5, 67))
    return [x, x.max(axis=1)]


def _softmax_div_inputs() -> list[np.ndarray]:
    x = rand((5, 67))
    m = x.max(axis=1)
    return [x, m, np.exp(x - m[:, None]).sum(axis=1)]


def _nan_rows() -> list[np.ndarray]:
    x = rand((4, 50))
    x[1, 17] = np.nan
    x[2, 3] = np.inf
    x[3, :] = -np.inf
    return [x]


def _int_pairs() -> list[np.ndarray]:
    a = RNG.integers(-1000, 1000, 101)
    b = RNG.integers(-9, 10, 101)
    b[:4] = [0, -1, 1, 0]
    a[:4] = [7, np.iinfo(np.int64).min, -5, -7]
    return [a, b]


def _column_nan() -> list[np.ndarray]:
    x = rand((100, 37))
    x[80, 3] = np.nan  # in the second chunk
    x[5, 4] = np.nan  # in the first
    return [x]


def _gather_inputs() -> list[np.ndarray]:
    return [rand((7, 5)), np.array([0, -1, 6, -7], np.int64)]


CASES: dict[str, Case] = {
    "matmul_remainder": _case(matmul(37, 45, 29), TileConfig((16, 32), (6, 16), (29,), 8)),
    "matmul_default_tile": _case(matmul(64, 96, 80)),
    "matmul_reduce_chunks": _case(matmul(37, 45, 150), TileConfig((16, 32), (6, 16), (64,), 8)),
    "linear_relu_reduce_chunks": _case(linear_relu(21, 19, 131), TileConfig((8, 19), (4, 16), (64,), 8)),
    "column_max_reduce_chunks": _case(column_max(100, 37), TileConfig((37,), (16,), (70,), 8), _column_nan),
    "matmul_float64": _case(matmul(20, 19, 33, "float64")),
    "batched_matmul_broadcast": _case(batched_matmul_broadcast()),
    "conv2d_stride_dilation_pad": _case(conv2d(2, 2, 1)),
    "conv2d_same": _case(conv2d(1, 1, 1)),
    # micro-tile rows wider than a vector: cut at the interior's edges
    "conv2d_interior_cuts": _case(conv2d(1, 1, 1, 9, 45), TileConfig((1, 3, 4, 40), (1, 3, 1, 16), (3, 3, 3), 8)),
    "conv2d_strided_cuts": _case(conv2d(2, 2, 2, 9, 45), TileConfig((1, 4, 4, 21), (1, 2, 1, 10), (3, 3, 3), 8)),
    "depthwise": _case(depthwise()),
    "depthwise_block_cut_to_stage": _case(depthwise_wide(), TileConfig((1, 8, 64, 64), (1, 1, 4, 16), (3, 3), 8)),
    "depthwise_vector_epilogue": _case(depthwise_epilogue(), TileConfig((1, 1, 6, 24), (1, 1, 2, 8), (3, 3), 8)),
    "column_sum_vector_chunked": _case(column_sum(4, 150, 32, post=Var("acc", "float32") / 150.0),
                                       TileConfig((4, 32), (2, 16), (64,), 8)),
    "column_sum_vector_float64": _case(column_sum(3, 20, 16, "float64"), TileConfig((3, 16), (1, 8), (20,), 4)),
    "relu_propagates_nan_vector": _case(column_sum(4, 150, 32, post=call("max", Var("acc", "float32"), 0.0)),
                                        TileConfig((2, 32), (2, 16), (150,), 8), _column_nans),
    # rows of 12 and 20 (8 lanes): a last vector overlapping the one before it
    "depthwise_vector_overlap": _case(depthwise_epilogue(), TileConfig((1, 1, 6, 24), (1, 1, 2, 12), (3, 3), 8)),
    "column_sum_vector_overlap_chunked": _case(column_sum(4, 150, 20, post=Var("acc", "float32") / 150.0),
                                               TileConfig((4, 20), (2, 20), (64,), 8)),
    "maxpool_inf_pad": _case(maxpool()),
    # tasks that start and end inside the select's ranges and the rows' interiors
    "outer_select_pieces": _case(outer_select(), TileConfig((2, 3, 19), (1, 1, 19), (), 8)),
    "strided_windows_interior": _case(strided_windows(), TileConfig((1, 4, 10), (1, 1, 10), (), 8)),
    "window_columns_interior": _case(window_columns(), TileConfig((1, 2, 12), (1, 1, 12), (), 8)),
    # tasks of 11 positions: the second straddles the halves' boundary
    "inner_select_pieces": _case(half_rotation(), TileConfig((1, 2, 11), (1, 1, 11), (), 8)),
    # stride-2 windows on the explicit-SIMD path: two loads and a lane shuffle per vector
    "maxpool_stride2_vector": _case(maxpool(37, 43), TileConfig((1, 3, 19, 22), (1, 1, 2, 22), (3, 3), 8),
                                    _nan_map((1, 3, 37, 43))),
    "depthwise_stride2_vector": _case(depthwise_stride2(), TileConfig((1, 4, 19, 19), (1, 1, 2, 19), (3, 3), 8)),
    "softmax_max": _case(row_reduce("max", 5, 67)),
    "softmax_exp_sum": _case(softmax_exp_sum(5, 67), None, _softmax_sum_inputs),
    "softmax_divide": _case(softmax_divide(5, 67), None, _softmax_div_inputs),
    "max_propagates_nan": _case(row_reduce("max", 4, 50), None, _nan_rows),
    "min_propagates_nan": _case(row_reduce("min", 4, 50), None, _nan_rows),
    "prod_row": _case(row_reduce("prod", 3, 20)),
    "mean_row_post": _case(row_reduce("sum", 7, 33, post=Var("acc", "float32") / 33.0)),
    "max_row_float64_vector": _case(row_reduce("max", 3, 41, "float64"), None, lambda: [_nan_rows()[0].astype(np.float64)[:3, :41]]),
    "log_sum_exp_vector": _case(log_sum_exp(6, 75)),
    "masked_exp_vector": _case(masked_exp(9, 45), TileConfig((3, 45), (1, 1), (), 8)),
    # a vector epilogue over rows of 37 outputs: whole vectors, then the last one again
    "row_dot_gelu_vector": _case(row_dot_gelu(2, 37, 64), TileConfig((2, 37), (1, 1), (64,), 8, row_reduction=True)),
    # lanes 8 (AVX's sign-bit move), 4 (SSE's), 16 (halves OR-ed) and a tail in each
    "exp_vector_8": _case(exp_of(37, 203), TileConfig((8, 203), (1, 1), (), 8), _exp_inputs(37, 203)),
    "exp_vector_4": _case(exp_of(9, 203), TileConfig((3, 203), (1, 1), (), 4), _exp_inputs(9, 203)),
    "exp_vector_16": _case(exp_of(9, 203), TileConfig((3, 203), (1, 1), (), 16), _exp_inputs(9, 203)),
    "mean_middle_axis": _case(mean_middle_axis()),
    "global_average_pool": _case(global_average_pool()),
    "gather": _case(gather(), None, _gather_inputs),
    "elementwise_float": _case(elementwise_float()),
    "elementwise_int64": _case(elementwise_int64(), None, _int_pairs),
    "elementwise_bool": _case(elementwise_bool()),
    "scalar_sum": _case(scalar_sum()),
    "scalar_elementwise": _case(scalar_elementwise()),
    "empty_output": _case(empty_output()),
    "empty_reduce_sum": _case(empty_reduce("sum")),
    "empty_reduce_max": _case(empty_reduce("max")),
    "reduce_no_axes": _case(reduce_no_axes()),
    "float16": _case(float16_chain()),
    "int32_sum": _case(int_sum_middle()),
    "any": _case(any_all("max")),
    "all": _case(any_all("prod")),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {f"k{n}": (c, t or default_tile(c, CPU)) for n, (c, t, _) in enumerate(CASES.values())}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("ckernels")))


def _tolerance(c: Compute) -> dict[str, float]:
    if c.dtype == "float16":
        return {"rtol": 2e-3, "atol": 2e-3}
    if c.dtype == "float32":
        return {"rtol": 1e-5, "atol": 1e-5 * max(1, math.prod(a.extent for a in c.reduce_axes))}
    # reordered sums differ by a few ulp of their terms, not of a total that cancels
    return {"rtol": 1e-12, "atol": 1e-12 * max(1, math.prod(a.extent for a in c.reduce_axes))}


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_interpreter(library: KernelLibrary, name: str) -> None:
    symbol = f"k{list(CASES).index(name)}"
    compute, _, make_inputs = CASES[name]
    inputs = make_inputs()
    got = library.run(symbol, inputs)
    want = evaluate(compute, inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, equal_nan=True, **_tolerance(compute))
    else:
        np.testing.assert_array_equal(got, want)


def test_source_has_only_generated_identifiers() -> None:
    c = Compute((Axis("secret_axis", 4),), Load(0, (Var("secret_axis"),), "float32") * 2.0,
                (TensorType((4,), "float32"),), "float32", label="Evil; system(rm)")
    src = render_planned(c, default_tile(c, CPU), "tf_0123abcd")
    assert "secret" not in src and "Evil" not in src and "system" not in src
    assert "void tf_0123abcd(float* restrict out, const float* restrict in0)" in src


def test_bad_symbol_or_tile_is_refused() -> None:
    c = matmul(4, 4, 4)
    with pytest.raises(ValueError, match="identifier"):
        render_kernel(c, default_tile(c, CPU), "x; int y")
    with pytest.raises(ValueError, match="axes"):
        render_kernel(c, TileConfig((4,), (1,), (4,)), "k")


def test_big_kernels_run_in_parallel_and_small_ones_do_not() -> None:
    big, small = matmul(256, 256, 256), matmul(4, 4, 4)
    assert "omp parallel" in render_planned(big, default_tile(big, CPU), "k")
    assert "omp parallel" not in render_planned(small, default_tile(small, CPU), "k")


def test_default_tile_gives_every_core_work() -> None:
    tile = default_tile(matmul(512, 512, 512), CPU)
    assert te.num_tiles(matmul(512, 512, 512), te.Tile(dict(zip(("i0", "i1"), tile.block, strict=True)))) >= 2 * CPU.units
    assert tile.thread[-1] % tile.vector == 0 and all(b >= t for b, t in zip(tile.block, tile.thread, strict=True))


def test_default_tile_puts_rows_where_vector_loads_are_shared() -> None:
    conv = conv2d(1, 1, 1, 40, 64)  # axes (n, co, oh, ow): the input row is shared by channels
    tile = default_tile(conv, CPU)
    assert tile.thread[1] > 1 and tile.thread[2] == 1 and tile.thread[3] >= CPU.lanes
    mm = matmul(96, 128, 64)  # rows of A share a row of B
    assert default_tile(mm, CPU).thread[0] > 1


# a wide map stays on micro-tiles (small ones are computed plane by plane: c/plane.py)
@pytest.mark.parametrize("make", [depthwise_wide, maxpool])
def test_padded_windows_are_staged_and_read_without_checks(make: Callable[[], Compute]) -> None:
    c = make()
    src = render_planned(c, default_tile(c, CPU), "k", CPU)
    assert "__attribute__((aligned(64)))" in src  # the scratch box each task fills
    assert NO_IF_CONVERT not in src  # no checked load left, so loops may vectorize


def test_a_select_by_an_outer_index_runs_range_by_range() -> None:
    c, tile, _ = CASES["outer_select_pieces"]
    src = render_planned(c, tile, "k", CPU)
    values = [line for line in src.split("void k_team")[1].splitlines() if "const float" in line]
    assert values and not any(" ? " in v for v in values)  # each range's loop reads its branch alone
    assert src.count("for (int64_t u1 = (b1 < ") == 5  # one loop per range of i1


def test_a_select_by_the_innermost_index_runs_range_by_range() -> None:
    c, tile, _ = CASES["inner_select_pieces"]
    src = render_planned(c, tile, "k", CPU)
    values = re.findall(r"const \w+ t\d+ = .*", src.split("void k_team")[1])
    assert values and not any(" ? " in v for v in values)  # no select, no clamp: plain loads gcc vectorizes
    assert src.count("#pragma omp simd\n") >= 2 and src.count("for (int64_t u2 = (b2 < ") == 2


def test_element_wise_rows_read_their_interior_without_checks() -> None:
    c, tile, _ = CASES["strided_windows_interior"]
    src = render_planned(c, tile, "k", CPU).split("void k_team")[1]
    interior = src.split("for (int64_t u2 = lo2; u2 < hi2; ++u2)")[1].split("for (int64_t u2 = hi2")[0]
    assert "in0[" in interior and " ? " not in interior  # unchecked loads: the loop vectorizes


def test_rows_whose_padded_column_mixes_an_outer_axis_share_one_interior() -> None:
    c, tile, _ = CASES["window_columns_interior"]
    src = render_planned(c, tile, "k", CPU).split("void k_team")[1]
    # columns 2 x i2 + i1 - 1 and + 1 lie in [0, 24) for every i1 in [0, 4) where i2 is in [1, 9]
    assert "lo2 = (b2 < 1L ? 1L - b2 : 0)" in src and "(10L - b2 < e2 ? 10L - b2 : e2)" in src
    interior = src.split("for (int64_t u2 = lo2; u2 < hi2; ++u2)")[1].split("for (int64_t u2 = hi2")[0]
    assert "in0[" in interior and " ? " not in interior


@pytest.mark.parametrize("name", ["depthwise_vector_epilogue", "column_sum_vector_chunked",
                                  "column_sum_vector_float64", "relu_propagates_nan_vector",
                                  "depthwise_vector_overlap", "column_sum_vector_overlap_chunked",
                                  "maxpool_stride2_vector", "depthwise_stride2_vector"])
def test_whole_vector_rows_keep_their_accumulators_in_vector_registers(name: str) -> None:
    compute, tile, _ = CASES[name]
    src = render_planned(compute, tile, "k")
    assert "vector_size" in src and " acc[" not in src  # named vector accumulators, no array


@pytest.mark.parametrize("name", ["exp_vector_8", "exp_vector_4", "exp_vector_16"])
def test_vector_exp_is_within_one_ulp_of_the_correctly_rounded_exp(library: KernelLibrary, name: str) -> None:
    compute, tile, make_inputs = CASES[name]
    assert exp_function(tile.vector) in render_planned(compute, tile, "k")  # the inlined vector exp
    x = make_inputs()[0]
    got = library.run(f"k{list(CASES).index(name)}", [x])
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)  # exp rounded once
    assert np.array_equal(np.isnan(got), np.isnan(x))
    finite = np.isfinite(want) & ~np.isnan(x)
    assert np.array_equal(got[~finite & ~np.isnan(x)], want[~finite & ~np.isnan(x)])  # inf stays inf
    ulps = np.abs(got[finite].view(np.int32).astype(np.int64) - want[finite].view(np.int32).astype(np.int64))
    assert ulps.max() <= 1


@pytest.mark.parametrize("name", ["softmax_max", "max_propagates_nan", "prod_row", "max_row_float64_vector",
                                  "softmax_exp_sum", "log_sum_exp_vector"])
def test_row_reductions_fold_named_vectors(name: str) -> None:
    compute, tile, _ = CASES[name]
    src = render_planned(compute, tile or default_tile(compute, CPU), "k")
    assert "vector_size" in src and "part[" not in src  # vector accumulators, no array of partials
    assert "__builtin_shuffle(lanes" in src  # the lanes folded as a tree, not one by one


def test_selects_on_index_comparisons_and_lane_uniform_flags_run_on_vectors() -> None:
    compute, tile, _ = CASES["masked_exp_vector"]
    src = render_planned(compute, tile, "k")
    assert "tf_vm){0, 1, 2, 3, 4, 5, 6, 7}" in src and "-(int64_t)(" in src


def test_a_row_reductions_transcendental_epilogue_runs_on_vectors() -> None:
    compute, tile, _ = CASES["row_dot_gelu_vector"]
    src = render_planned(compute, tile, "k")
    assert "tf_erf_f32x8(" in src and "erff(" in src  # whole vectors; a row shorter than one: libm


def test_rows_shorter_than_a_vector_stay_on_the_array_path() -> None:
    c = column_sum(4, 40, 12)
    src = render_planned(c, TileConfig((4, 12), (2, 6), (40,), 8), "k")
    assert "vector_size" not in src and " acc[" in src


def test_boxes_beyond_the_scratch_budget_are_not_staged() -> None:
    side = 200  # one 200x200 float box per task: 160 KB, more than a task's scratch may take
    x = Load(0, (i0, i1 + r0 - 1, i2 + r1 - 1), "float32", pad=0.0)
    c = Compute(axes(1, side, side), x, (TensorType((1, side, side), "float32"),),
                "float32", axes(3, 3, prefix="r"), "sum")
    assert staged_block(c, (1, side, side), (1, side, side)) == ()  # no cut below the micro-tile
    assert staged_block(c, (1, side, side), (1, 8, 8)) == (1, 13, 200)  # rows halved until it fits (15 x 202)
    assert stage_padded_loads(c, (1, 8, 8))[1]


def test_blocks_too_big_to_stage_are_cut_until_they_fit() -> None:
    c = depthwise_wide(16, 56)
    # 16 channels of 58 x 58 is 215 KB; one channel (13 KB) fits: channels are cut, rows kept
    assert staged_block(c, (1, 16, 56, 56), (1, 1, 4, 16)) == (1, 1, 56, 56)
    assert staged_block(c, (1, 2, 8, 56), (1, 1, 4, 16)) == (1, 2, 8, 56)  # fits already
    wide = depthwise_wide(16, 64)  # rows of whole vectors stay on micro-tiles (56-wide ones: planes, c/plane.py)
    src = render_planned(wide, TileConfig((1, 16, 64, 64), (1, 1, 4, 16), (3, 3), 8), "k", CPU)
    assert "__attribute__((aligned(64)))" in src and NO_IF_CONVERT not in src


@pytest.mark.skipif(platform.machine() not in {"x86_64", "AMD64"}, reason="x86 string moves")
def test_staged_rows_are_copied_by_vector_loops_not_string_moves() -> None:
    """A staging unit keeps its row copies loops (NO_COPY_CALLS): for AVX-512 with generic
    tuning gcc expands the memcpy it would make of them as `rep movsq`, whose start-up
    each short row pays (a 3x3 max-pool over 64 x 56 x 56, as planned: 223 -> 125 us)."""
    x = Load(0, (i0, i1, i2 + r0 - 1, i3 + r1 - 1), "float32", pad=-math.inf)
    pool = Compute(axes(1, 64, 56, 56), x, (TensorType((1, 64, 56, 56), "float32"),), "float32",
                   axes(3, 3, prefix="r"), "max")
    src = render_planned(pool, TileConfig((1, 64, 56, 56), (1, 1, 2, 56), (3, 3), 16), "k", CPU)
    assert src.index(NO_COPY_CALLS) < src.index("void k_team(")
    assert "rep movs" not in listing(src, "x86-64-v4")
    assert "rep movs" in listing(src.replace(NO_COPY_CALLS, ""), "x86-64-v4")  # what the pragma prevents


@pytest.mark.parametrize("name", ["maxpool_stride2_vector", "depthwise_stride2_vector"])
def test_stride_two_windows_load_two_vectors_and_shuffle_their_lanes(name: str) -> None:
    compute, tile, _ = CASES[name]
    if name.startswith("depthwise"):  # on micro-tiles only where its planes outgrow the scratch (c/plane.py)
        compute = depthwise_stride2(301)
    src = render_planned(compute, tile, "k")
    assert "__builtin_shuffle" in src and " acc[" not in src


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_window_rows_shorter_than_a_target_vector_stay_on_micro_tiles(lanes: int) -> None:
    # a stride-2 depthwise convolution on a 7-wide output: its one-element tile vector
    # once sent the 3-wide window rows down the row-reduction path (0.15x onnxruntime)
    c = depthwise_stride2(13)
    assert not reduces_rows(merge_reduce_axes(c, default_tile(c, CPU))[0], 1, lanes)
    assert reduces_rows(merge_reduce_axes(c, default_tile(c, CPU))[0], 1, 2)
