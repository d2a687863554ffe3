"""Computes for the CUDA renderer's tests: the C renderer's cases (every loop structure,
padding, gather, int and bool semantics, empty and 0-d outputs) plus the shapes the
CUDA kernel kinds specialise on (tiled GEMM with 128-bit loads, batched GEMM with an
epilogue, implicit-GEMM convolution, multi-warp row reductions, layer norm stages)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from test_c_kernels import CASES as C_CASES
from test_c_kernels import Case, axes, i0, i1, i2, i3, matmul, r0, r1, r2, rand
from test_c_rows import layer_norm, residual_layer_norm, softmax

from compiler.ir import te
from compiler.ir.te import Compute, Load, TensorType, Var, call
from compiler.schedule.cuda_tile import plan_cuda_tile
from compiler.schedule.plan import TileConfig
from compiler.schedule.split_k import split_compute
from compiler.schedule.tilegraph.rowtile import row_group_tilings
from compiler.schedule.tiling import default_tile
from compiler.target.registry import get_target

GPU = get_target("cuda:h100")
ACC = Var("acc", "float32")


def batched_matmul_bias_relu(b: int, m: int, n: int, k: int) -> Compute:
    body = Load(0, (i0, i1, r0), "float32") * Load(1, (i0, r0, i2), "float32")
    post = call("max", ACC + Load(2, (i2,), "float32"), 0.0)
    return Compute(axes(b, m, n), body, (TensorType((b, m, k), "float32"),
                   TensorType((b, k, n), "float32"), TensorType((n,), "float32")),
                   "float32", axes(k, prefix="r"), "sum", post, "MatMul+Add+Relu")


def conv_implicit_gemm(n: int, c: int, hw: int, co: int) -> Compute:
    """3x3, pad 1, stride 1 over NCHW: the x operand's side is (n, oh, ow), the weight's co."""
    x = Load(0, (i0, r0, i2 + r1 - 1, i3 + r2 - 1), "float32", pad=0.0)
    return Compute(axes(n, co, hw, hw), x * Load(1, (i1, r0, r1, r2), "float32"),
                   (TensorType((n, c, hw, hw), "float32"), TensorType((co, c, 3, 3), "float32")),
                   "float32", axes(c, 3, 3, prefix="r"), "sum", label="Conv")


def split_k_conv(slices: int) -> tuple[Compute, Compute]:
    """A 3x3 convolution with bias and Relu cut into `slices` partial sums (its channels
    walked side by side) and their sum with the epilogue (compiler/schedule/split_k.py)."""
    c = conv_implicit_gemm(1, 16, 6, 8)
    c = dataclasses.replace(c, post=call("max", ACC + Load(2, (i1,), "float32"), 0.0),
                            inputs=(*c.inputs, TensorType((8,), "float32")))
    partial, total, _, _ = split_compute(c, slices)
    return partial, total


def layernorm_mean(rows: int, cols: int) -> Compute:
    return Compute(axes(rows), Load(0, (i0, r0), "float32"), (TensorType((rows, cols), "float32"),),
                   "float32", axes(cols, prefix="r"), "sum", ACC / float(cols))


def layernorm_rstd(rows: int, cols: int) -> Compute:
    """1 / sqrt(var + eps) from x and the row mean."""
    d = Load(0, (i0, r0), "float32") - Load(1, (i0,), "float32")
    post = call("reciprocal", call("sqrt", ACC / float(cols) + 1e-5))
    return Compute(axes(rows), d * d, (TensorType((rows, cols), "float32"),
                   TensorType((rows,), "float32")), "float32", axes(cols, prefix="r"), "sum", post)


def layernorm_apply(rows: int, cols: int) -> Compute:
    x, mean, rstd = Load(0, (i0, i1), "float32"), Load(1, (i0,), "float32"), Load(2, (i0,), "float32")
    body = (x - mean) * rstd * Load(3, (i1,), "float32") + Load(4, (i1,), "float32")
    return Compute(axes(rows, cols), body, (
        TensorType((rows, cols), "float32"), TensorType((rows,), "float32"),
        TensorType((rows,), "float32"), TensorType((cols,), "float32"),
        TensorType((cols,), "float32")), "float32", label="LayerNorm")


def int64_row_sum(rows: int, cols: int) -> Compute:
    return Compute(axes(rows), Load(0, (i0, r0), "int64") * 3, (TensorType((rows, cols), "int64"),),
                   "int64", axes(cols, prefix="r"), "sum")


def gemm_repeated_index(m: int, n: int, k: int) -> Compute:
    """out[i, j] = sum_r a[0, i, r] * b[r, j, j]: a constant index, and a column index used
    twice (its elements are not contiguous, so no 128-bit loads on that side)."""
    body = Load(0, (te.const(0, "int64"), i0, r0), "float32") * Load(1, (r0, i1, i1), "float32")
    return Compute(axes(m, n), body, (TensorType((1, m, k), "float32"),
                   TensorType((k, n, n), "float32")), "float32", axes(k, prefix="r"), "sum")


def _layernorm_rstd_inputs() -> list[np.ndarray]:
    x = rand((6, 768))
    return [x, x.mean(axis=1)]


def _layernorm_apply_inputs() -> list[np.ndarray]:
    x = rand((6, 768))
    return [x, x.mean(axis=1), 1 / np.sqrt(x.var(axis=1) + 1e-5), rand((768,)), rand((768,))]


def _row_group(c: Compute) -> Case:
    """A fused group with the one tiling a GPU gives groups (a row per block)."""
    return _plain(c, row_group_tilings(c, GPU, 1)[0][0])


def _plain(c: Compute, tile: TileConfig | None = None,
           inputs: Callable[[], list[np.ndarray]] | None = None) -> Case:
    return c, tile, inputs or (lambda: [rand(t.shape, t.dtype) for t in c.inputs])


CUDA_CASES: dict[str, Case] = {
    "gemm_vector_loads": _plain(matmul(128, 256, 64), TileConfig((64, 128), (4, 8), (16,))),
    "gemm_ragged_edges": _plain(matmul(70, 45, 37), TileConfig((32, 32), (4, 4), (8,))),
    "gemm_repeated_index": _plain(gemm_repeated_index(16, 8, 12), TileConfig((16, 8), (2, 2), (4,))),
    "gemm_int32": _plain(matmul(33, 40, 21, "int32"), TileConfig((32, 32), (2, 2), (8,))),
    "batched_gemm_epilogue": _plain(batched_matmul_bias_relu(3, 33, 40, 24)),
    "conv_implicit_gemm": _plain(conv_implicit_gemm(2, 8, 10, 16)),
    "split_k_partial_conv": _plain(split_k_conv(4)[0]),
    "split_k_sum_epilogue": _plain(split_k_conv(4)[1]),
    "layernorm_mean_768": _plain(layernorm_mean(6, 768)),
    "layernorm_rstd_768": _plain(layernorm_rstd(6, 768), None, _layernorm_rstd_inputs),
    "layernorm_apply_768": _plain(layernorm_apply(6, 768), None, _layernorm_apply_inputs),
    "softmax_max_1000": _plain(Compute(axes(5), Load(0, (i0, r0), "float32"),
                                       (TensorType((5, 1000), "float32"),), "float32",
                                       axes(1000, prefix="r"), "max")),
    "int64_row_sum": _plain(int64_row_sum(5, 100)),
    # fused row groups (cuda/rows.py): one block per row, stages in shared memory
    "row_group_softmax": _row_group(softmax([6, 40])),
    "row_group_softmax_long_row": _row_group(softmax([3, 5000])),
    "row_group_softmax_middle_axis": _row_group(softmax([3, 6, 5], axis=1)),
    "row_group_layer_norm_two_row_axes": _row_group(layer_norm([3, 10, 24])),
    "row_group_layer_norm_768": _row_group(layer_norm([4, 768])),
    "row_group_residual_layer_norm_unit_batch": _row_group(residual_layer_norm([1, 10, 24])),
}

ALL_CASES: dict[str, Case] = {**C_CASES, **CUDA_CASES}


def tile_for(case: Case) -> TileConfig:
    """The case's own tile, else the schedule's default for the H100 preset, with its CUDA
    launch planned (as the CUDA backend's tile step does)."""
    c, tile, _ = case
    return plan_cuda_tile(c, tile or default_tile(c, GPU))


def check_close(got: np.ndarray, want: np.ndarray, c: Compute) -> None:
    """A kernel's output against the interpreter's: exact for integers and bool; for floats
    within rounding, scaled by the reduction length (summation order differs)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    if np.issubdtype(want.dtype, np.floating):
        reduce_len = max(1, math.prod(a.extent for a in c.reduce_axes))
        tol = 2e-3 if c.dtype == "float16" else 1e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * reduce_len, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
