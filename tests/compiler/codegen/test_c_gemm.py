"""The packed SIMD contraction path (compiler/codegen/c/gemm.py): which Computes take it,
how tiles round to micro-kernels, and that its kernels agree with the interpreter
(remainders in M, N and K, several K blocks, batches, epilogues, padded convolutions,
every supported SIMD width)."""

from __future__ import annotations

import dataclasses
import platform
import re
from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary, listing, planned, render_planned
from test_c_kernels import (
    axes,
    batched_matmul_broadcast,
    conv2d,
    depthwise,
    global_average_pool,
    i0,
    i1,
    i2,
    i3,
    linear_relu,
    matmul,
    r0,
    r1,
    r2,
    rand,
)

from compiler.codegen.c.gemm import IN_PLACE_AHEAD, keeps_a, micro_name, stores_from_registers
from compiler.codegen.c.vector_math import exp_function
from compiler.ir import te
from compiler.ir.contraction import match_contraction, side_extent
from compiler.ir.interp import evaluate
from compiler.ir.te import Compute, Load, TensorType, Var, call
from compiler.schedule.cpu_gemm import WEIGHTS_SHARE, gemm_blocking, gemm_contraction, gemm_variants
from compiler.schedule.gemm_blocking import MicroKernel, micro_tails
from compiler.schedule.merge_axes import merge_axes, merge_reduce_axes
from compiler.schedule.prepack import prepacked_inputs
from compiler.schedule.tiling import default_tile
from compiler.target.base import Target


def cpu(lanes: int) -> Target:
    """A CPU target with `lanes` float32 SIMD lanes (32 vector registers from AVX-512 up)."""
    return Target(name="cpu", kind="cpu", arch="x86_64", levels=(), units=2, lanes=lanes, banks=1,
                  registers=32 if lanes >= 16 else 16, peak_flops={})


CPU = cpu(8)


def conv1x1_gelu_residual() -> Compute:
    """x (2,16,5,7) 1x1-conv w (24,16) with tanh(acc) + residual r (2,24,5,7) in `post`."""
    body = Load(0, (i0, r0, i2, i3), "float32") * Load(1, (i1, r0), "float32")
    post = call("tanh", Var("acc", "float32")) + Load(2, (i0, i1, i2, i3), "float32")
    return Compute(axes(2, 24, 5, 7), body, (TensorType((2, 16, 5, 7), "float32"),
                   TensorType((24, 16), "float32"), TensorType((2, 24, 5, 7), "float32")),
                   "float32", axes(16, prefix="r"), "sum", post)


def matmul_gelu_bias(m: int, n: int, k: int) -> Compute:
    """A Linear with BERT's GELU in `post`: erf(acc / sqrt(2)) along the columns, a bias."""
    acc = Var("acc", "float32") + Load(2, (i1,), "float32")
    post = 0.5 * acc * (1.0 + call("erf", acc * 0.7071067811865476))
    mm = matmul(m, n, k)
    return dataclasses.replace(mm, post=post, inputs=(*mm.inputs, TensorType((n,), "float32")))


def transposed_lhs(m: int, n: int, k: int) -> Compute:
    """A stored K x M (a Gemm with transA): the rows operand is strided along K."""
    return Compute(axes(m, n), Load(0, (r0, i0), "float32") * Load(1, (r0, i1), "float32"),
                   (TensorType((k, m), "float32"), TensorType((k, n), "float32")), "float32",
                   axes(k, prefix="r"), "sum")


def mirrored_conv(w: int = 20) -> Compute:
    """A 3x3 convolution reading its input's width mirrored (index 11 - 2 * i3 - r2, pad 0): the
    packed rows' clipped runs for a negative stride, past both edges of the input."""
    x = Load(0, (i0, r0, i2 + r1 - 1, te.const(11, "int64") - i3 * 2 - r2), "float32", pad=0.0)
    return Compute(axes(1, 4, 9, w), x * Load(1, (i1, r0, r1, r2), "float32"),
                   (TensorType((1, 3, 9, 12), "float32"), TensorType((4, 3, 3, 3), "float32")),
                   "float32", axes(3, 3, 3, prefix="r"), "sum")


CASES: dict[str, tuple[Compute, int]] = {
    "matmul_remainders": (matmul(13, 37, 29), 8),
    "matmul_k_blocks": (matmul(50, 40, 2 * 256 + 7), 8),  # kc is at most 256 with a 32 KB L1
    "matmul_big": (matmul(200, 300, 64), 8),
    "linear_relu": (linear_relu(50, 70, 33), 8),
    "batched_broadcast": (batched_matmul_broadcast(), 4),
    "conv_pad1": (conv2d(1, 1, 1, 20, 21), 8),
    "conv_stride2_dilation2": (conv2d(2, 2, 2, 20, 21), 8),
    "conv1x1_residual": (conv1x1_gelu_residual(), 8),
    "conv_mirrored": (mirrored_conv(), 8),
    "transposed_lhs": (transposed_lhs(30, 33, 17), 8),
    "transposed_lhs_avx512_k_blocks": (transposed_lhs(59, 70, 2 * 256 + 7), 16),  # whole panels and a partial one
    "matmul_sse_width": (matmul(21, 45, 19), 4),
    "matmul_avx512_width": (matmul(31, 70, 40), 16),
    "matmul_avx512_tails": (matmul(59, 70, 30), 16),  # 11 of 12 rows and 1 vector of 2 in the last panels
    "matmul_gelu_avx512": (matmul_gelu_bias(37, 75, 24), 16),  # 75 columns: a vector tail
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {name: (c, default_tile(c, CPU)) for name, (c, _) in CASES.items()}
    targets = {name: cpu(lanes) for name, (_, lanes) in CASES.items()}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("gemm")), targets)


@pytest.mark.parametrize("name", list(CASES))
def test_packed_kernel_matches_interpreter(library: KernelLibrary, name: str) -> None:
    assert "tf_micro" in library.sources[name]
    compute = CASES[name][0]
    inputs = [rand(t.shape) for t in compute.inputs]
    k = np.prod([a.extent for a in compute.reduce_axes])
    np.testing.assert_allclose(library.run(name, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * k)


@pytest.mark.parametrize("name", ["transposed_lhs", "transposed_lhs_avx512_k_blocks"])
def test_a_transposed_lhs_is_packed_a_reduce_index_at_a_time(library: KernelLibrary, name: str) -> None:
    """Rows contiguous, K strided (Gemm transA): a whole panel copies each k's run of rows."""
    mr = re.search(r"ap \+ p \* kc \* (\d+)L;", library.sources[name])
    assert mr is not None and f"dst[k * {mr.group(1)}L + i] = " in library.sources[name]


@pytest.mark.parametrize(("name", "function"), [("conv1x1_residual", "tf_tanh_f32x8"),
                                                ("matmul_gelu_avx512", "tf_erf_f32x16")])
def test_epilogues_with_a_transcendental_store_whole_vectors(library: KernelLibrary, name: str,
                                                            function: str) -> None:
    assert f"= {function}(" in library.sources[name]  # the inlined vector function, not libmvec's


@pytest.fixture(scope="module")
def prepacked(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    """CASES again with weights: every input constant (both sides packed at load, where
    they read different inputs), and the rows or the cols operand alone constant."""
    kernels, targets, constants = {}, {}, {}
    for name, (c, lanes) in CASES.items():
        m = gemm_contraction(merge_axes(c, default_tile(c, CPU))[0], cpu(lanes))
        assert m is not None and isinstance(m.lhs, Load) and isinstance(m.rhs, Load)
        for variant, positions in (("all", tuple(range(len(c.inputs)))), ("rows", (m.lhs.input,)),
                                   ("cols", (m.rhs.input,))):
            kernels[f"{name}_{variant}"] = (c, default_tile(c, CPU))
            targets[f"{name}_{variant}"] = cpu(lanes)
            constants[f"{name}_{variant}"] = positions
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("prepacked")), targets, constants)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("variant", ["all", "rows", "cols"])
def test_operands_packed_at_load_give_the_same_result(prepacked: KernelLibrary, name: str, variant: str) -> None:
    symbol = f"{name}_{variant}"
    assert prepacked.packed[symbol], "a constant GEMM operand is packed at load"
    assert all(f"void {symbol}_pack{pos}(" in prepacked.sources[symbol] for pos in prepacked.packed[symbol])
    compute = CASES[name][0]
    inputs = [rand(t.shape) for t in compute.inputs]
    k = np.prod([a.extent for a in compute.reduce_axes])
    np.testing.assert_allclose(prepacked.run(symbol, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * k)


def test_only_constant_operands_of_the_packed_path_are_prepacked() -> None:
    c = matmul(64, 64, 64)
    tile = default_tile(c, CPU)
    assert prepacked_inputs(planned(c, tile, CPU, ())) == {}
    assert set(prepacked_inputs(planned(c, tile, CPU, (1,)))) == {1}
    assert prepacked_inputs(planned(depthwise(), default_tile(depthwise(), CPU), CPU, (1,))) == {}  # not a GEMM
    squared = Compute(axes(16, 16), Load(0, (i0, r0), "float32") * Load(0, (r0, i1), "float32"),
                      (TensorType((16, 16), "float32"),), "float32", axes(16, prefix="r"), "sum")
    assert prepacked_inputs(planned(squared, default_tile(squared, CPU), CPU, (0,))) == {}  # one pointer, two layouts


def test_vector_width_follows_the_target() -> None:
    c = matmul(64, 64, 64)
    tile = default_tile(c, CPU)
    assert "vector_size(16)" in render_planned(c, tile, "k", cpu(4))
    assert "vector_size(32)" in render_planned(c, tile, "k", cpu(8))
    assert "vector_size(64)" in render_planned(c, tile, "k", cpu(16))


@pytest.mark.parametrize(("compute", "lanes"), [
    (depthwise(), 8),  # no operand owns a side: not a GEMM
    (matmul(8, 8, 8, "float64"), 8),
    (matmul(8, 8, 8, "int32"), 8),
    (matmul(2, 64, 8), 8),  # too few rows to fill a micro-kernel
    (matmul(64, 64, 64), 1),  # no SIMD
])
def test_other_computes_keep_the_general_path(compute: Compute, lanes: int) -> None:
    assert gemm_contraction(compute, cpu(lanes)) is None
    assert "tf_micro" not in render_planned(compute, default_tile(compute, CPU), "k", cpu(lanes))


@pytest.mark.parametrize(("m", "n", "tails"), [(256, 196, (4, 1)), (252, 224, (0, 0)), (250, 220, (12, 0))])
def test_the_last_panels_run_kernels_cut_to_what_is_valid(m: int, n: int, tails: tuple[int, int]) -> None:
    """14 x 32 panels (AVX-512): 256 rows leave 4 in the last panel, 196 columns 4 (one
    vector of 16); 220 columns leave 28, two vectors: no narrower kernel there."""
    c = matmul(m, n, 64)
    match = match_contraction(c)
    assert match is not None
    g = gemm_blocking(c, match, default_tile(c, cpu(16)), cpu(16))
    assert micro_tails(g.mk, g.m, g.n) == tails
    src = render_planned(c, default_tile(c, cpu(16)), "k", cpu(16))
    for rows, vectors in ((tails[0] or 14, 2), (14, tails[1] or 2), (tails[0] or 14, tails[1] or 2)):
        # K = 64 is one block: where the columns are whole vectors, the micro-kernels store
        # their blocks as computed (`_local`)
        assert f"{micro_name(rows, vectors, g, local=stores_from_registers(c, g) is not None)}(kc," in src


def test_contiguous_axes_merge_and_padded_ones_do_not() -> None:
    c = conv1x1_gelu_residual()
    merged, tile = merge_axes(c, default_tile(c, CPU))
    assert merged.shape == (2, 24, 35) and [t.shape for t in merged.inputs] == [(2, 16, 35), (24, 16), (2, 24, 35)]
    assert len(tile.block) == len(tile.thread) == 3
    padded = conv2d(1, 1, 1, 20, 21)
    assert merge_axes(padded, default_tile(padded, CPU))[0].shape == padded.shape


def test_contiguous_reduce_axes_merge_and_windows_do_not() -> None:
    gap = global_average_pool(12, 7, 9)
    merged, tile = merge_reduce_axes(gap, default_tile(gap, CPU))
    assert [a.extent for a in merged.reduce_axes] == [63] and merged.inputs[0].shape == (1, 12, 63)
    assert len(tile.reduce_step) == 1
    window = conv2d(1, 1, 1, 20, 21)  # (c, kh, kw) index a padded window, not whole dimensions
    assert merge_reduce_axes(window, default_tile(window, CPU))[0].reduce_axes == window.reduce_axes


def test_reduce_axes_used_as_values_do_not_merge(tmp_path: Path) -> None:
    """The last position r0 * 3 + r1 where x > 0 (how ScatterND finds the update that wins):
    r0, r1 index x as one contiguous run but are values too, so each keeps its variable."""
    body = te.select(call("gt", Load(0, (i0, r0, r1), "float32"), 0.0), r0 * 3 + r1, -1)
    c = Compute(axes(4), body, (TensorType((4, 2, 3), "float32"),), "int64", axes(2, 3, prefix="r"), "max")
    tile = default_tile(c, CPU)
    assert merge_reduce_axes(c, tile)[0].reduce_axes == c.reduce_axes
    x = rand((4, 2, 3))
    np.testing.assert_array_equal(KernelLibrary({"k": (c, tile)}, tmp_path).run("k", [x]), evaluate(c, [x]))


def window_conv(n: int, ci: int, co: int, h: int, w: int, kh: int, kw: int, dilation: int = 1,
                pads: tuple[int, int, int, int] | None = (1, 1, 1, 1), stride: int = 1) -> Compute:
    """x (n,ci,h,w) conv w (co,ci,kh,kw), `pads` (top, left, bottom, right; None: no padded
    load) + bias, relu: the windows the direct path reads in place."""
    top, left, bottom, right = pads or (0, 0, 0, 0)
    oh = (h + top + bottom - dilation * (kh - 1) - 1) // stride + 1
    ow = (w + left + right - dilation * (kw - 1) - 1) // stride + 1
    x = Load(0, (i0, r0, i2 * stride + r1 * dilation - top, i3 * stride + r2 * dilation - left), "float32",
             pad=None if pads is None else 0.0)
    post = call("max", Var("acc", "float32") + Load(2, (i1,), "float32"), 0.0)
    return Compute(axes(n, co, oh, ow), x * Load(1, (i1, r0, r1, r2), "float32"),
                   (TensorType((n, ci, h, w), "float32"), TensorType((co, ci, kh, kw), "float32"),
                    TensorType((co,), "float32")), "float32", axes(ci, kh, kw, prefix="r"), "sum", post, "Conv+Relu")


def silu_conv(conv: Compute) -> Compute:
    """`conv` (a `window_conv`) with SiLU after its bias instead of relu: a transcendental `post`."""
    z = Var("acc", "float32") + Load(2, (i1,), "float32")
    return dataclasses.replace(conv, post=z * (1.0 / (1.0 + call("exp", -z))), label="Conv+SiLU")


def residual_conv(conv: Compute) -> Compute:
    """`conv` (a `window_conv`) with a residual input added before its relu (Conv+Add+Relu)."""
    z = Var("acc", "float32") + Load(2, (i1,), "float32") + Load(3, (i0, i1, i2, i3), "float32")
    return dataclasses.replace(conv, post=call("max", z, 0.0), inputs=(*conv.inputs, TensorType(conv.shape, "float32")),
                               label="Conv+Add+Relu")


# Patches read in place as B (few output channels: positions in the lanes) or, named a_*, as
# A (channels in the lanes, positions broadcast: any stride).
DIRECT_CASES: dict[str, tuple[Compute, int]] = {
    "batch2_row_tail": (window_conv(2, 5, 6, 9, 37, 3, 3), 8),  # 37 = 16 + 16 + 5 columns a row
    "dilated_avx512": (window_conv(1, 4, 12, 10, 40, 3, 3, dilation=2, pads=(2, 2, 2, 2)), 16),
    "asymmetric_pads": (window_conv(1, 3, 8, 8, 19, 2, 3, pads=(0, 2, 1, 0)), 8),
    "no_padding": (window_conv(1, 6, 8, 9, 35, 3, 3, pads=None), 8),
    "row_kernel_only": (window_conv(1, 3, 5, 6, 70, 1, 5, pads=(0, 2, 0, 2)), 16),
    "planes_batch2": (window_conv(2, 4, 6, 21, 13, 3, 3), 8),  # 13-wide rows walked at period 15
    "planes_dilated": (window_conv(1, 3, 8, 9, 14, 3, 3, dilation=2, pads=(1, 2, 3, 2)), 16),
    # tasks of 256 positions: split mid-row, and one spans the end of image 0 and the start of image 1
    "planes_batch2_tasks_split_rows": (window_conv(2, 8, 8, 30, 45, 3, 3), 8),
    "silu_row_tail": (silu_conv(window_conv(2, 5, 6, 9, 37, 3, 3)), 8),
    # K = 576 in several blocks: each block of C is stored after its last one only
    "deep_k_blocks": (silu_conv(window_conv(1, 64, 8, 10, 37, 3, 3)), 8),
    "silu_planes": (silu_conv(window_conv(2, 4, 6, 21, 13, 3, 3)), 8),
    "a_stride2": (window_conv(1, 5, 32, 17, 17, 3, 3, stride=2), 16),
    "a_stem_7x7_stride2": (window_conv(1, 3, 16, 23, 23, 7, 7, pads=(3, 3, 3, 3), stride=2), 8),
    "a_batch2_channel_tail": (window_conv(2, 16, 48, 7, 7, 3, 3), 16),  # 48 channels: 32 + one vector
    "a_dilated_no_padding": (window_conv(1, 8, 32, 13, 11, 3, 3, dilation=2, pads=None), 16),
    # rows of whole vectors: the tile transposed to store along them (21 channels: 5 in a tail)
    "a_rows_transposed": (window_conv(1, 16, 40, 24, 24, 3, 3), 8),
    "a_stride2_batch2_rows_transposed": (window_conv(2, 8, 21, 34, 34, 3, 3, stride=2), 8),
    "a_silu_rows_transposed": (silu_conv(window_conv(1, 16, 40, 24, 24, 3, 3)), 8),
    "a_residual_rows_transposed": (residual_conv(window_conv(1, 3, 24, 40, 40, 7, 7, pads=(3, 3, 3, 3), stride=2)), 8),
    # rows narrower than a vector, following each other in out and in the residual: vectors cross rows
    "a_narrow_rows_transposed": (window_conv(1, 16, 40, 7, 7, 3, 3), 16),
    "a_stride2_narrow_residual_rows_transposed": (residual_conv(window_conv(1, 128, 128, 14, 14, 1, 1, pads=None,
                                                                            stride=2)), 16),
    "a_silu_narrow_rows_transposed": (silu_conv(window_conv(1, 8, 24, 10, 10, 3, 3, stride=2)), 16),
    # border panels whose outer tap rows (and, 8 positions wide, columns) read only padding
    "a_dilated_border_taps": (window_conv(1, 8, 32, 12, 12, 3, 3, dilation=5, pads=(5, 5, 5, 5)), 16),
    "dilated_border_taps": (window_conv(1, 4, 6, 12, 40, 3, 3, dilation=6, pads=(6, 6, 6, 6)), 8),
    # strided: the copy's columns split into phases, so positions read consecutive elements
    "phases_stride2_batch2_row_tail": (window_conv(2, 5, 6, 17, 37, 3, 3, stride=2), 8),
    "phases_stride2_asymmetric_pads": (window_conv(1, 3, 5, 8, 40, 3, 3, pads=(0, 1, 1, 0), stride=2), 8),
    "phases_stride2_dilated_border_taps": (window_conv(1, 4, 6, 12, 41, 3, 3, dilation=3, pads=(3, 3, 3, 3),
                                                       stride=2), 8),
    "phases_stride3_5x5": (window_conv(1, 3, 6, 16, 70, 5, 5, pads=(2, 2, 2, 2), stride=3), 8),
    # 1x1, batch 2, whole panels: the input itself, no copy (UNCOPIED)
    "pointwise_batch2_uncopied": (window_conv(2, 24, 16, 8, 16, 1, 1, pads=None), 8),
    "a_pointwise_7x7_uncopied": (window_conv(1, 40, 32, 7, 7, 1, 1, pads=None), 16),
}
UNCOPIED = ("pointwise_batch2_uncopied", "a_pointwise_7x7_uncopied", "a_dilated_no_padding")


@pytest.fixture(scope="module")
def direct(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    """DIRECT_CASES with their weights constant (the direct path reads A packed at load)."""
    kernels = {name: (c, default_tile(c, cpu(lanes))) for name, (c, lanes) in DIRECT_CASES.items()}
    targets = {name: cpu(lanes) for name, (_, lanes) in DIRECT_CASES.items()}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("direct")), targets,
                         {name: (1, 2) for name in DIRECT_CASES})


@pytest.mark.parametrize("name", list(DIRECT_CASES))
def test_windows_read_in_place_match_the_interpreter(direct: KernelLibrary, name: str) -> None:
    compute, lanes = DIRECT_CASES[name]
    c, tile = merge_axes(compute, default_tile(compute, cpu(lanes)))
    m = gemm_contraction(c, cpu(lanes))
    assert m is not None
    d = gemm_blocking(c, m, tile, cpu(lanes), constant_inputs=(1, 2)).direct
    assert d is not None and d.side == ("a" if name.startswith("a_") else "b")
    assert d.copied == (name not in UNCOPIED)
    assert d.step == 1 if d.side == "b" else d.step >= 1
    assert (d.phases > 1) == name.startswith("phases_")
    assert "tf_koff" in direct.sources[name]  # read in place, not gathered
    inputs = [rand(t.shape) for t in compute.inputs]
    k = np.prod([a.extent for a in compute.reduce_axes])
    np.testing.assert_allclose(direct.run(name, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * k)


@pytest.mark.parametrize(("lanes", "rows"), [(16, 7)])
def test_wide_micro_kernels_on_a_small_map_match_the_interpreter(tmp_path: Path, lanes: int, rows: int) -> None:
    """On a 7 x 7 map the positions broadcast fill 7 rows, so a micro-kernel 3 vectors wide
    (AVX-512's 32 registers hold 7 rows of it) is a variant too, and one 4 vectors wide on
    fewer rows (as many accumulators as 7 x 2 or more); 80 channels leave both a tail, 3x3
    windows a padded copy read in place. (AVX2's two-vector kernel walks the plane in panels
    of 6 rows, all its 16 registers hold: no wider one.)"""
    target = cpu(lanes)
    compute = window_conv(1, 24, 80, 7, 7, 3, 3)
    tile = default_tile(compute, target)
    wide = {f"v{t.gemm.mk.vectors}": t for _, t in gemm_variants(compute, tile, target, (1, 2))
            if t.gemm is not None and t.gemm.mk.vectors > 2}
    assert set(wide) == {"v3", "v4"} and wide["v3"].gemm is not None and wide["v3"].gemm.mk.rows == rows
    assert all(t.gemm is not None and t.gemm.mk.rows * t.gemm.mk.vectors >= rows * 2 for t in wide.values())
    assert all(t.gemm is not None and t.gemm.direct is not None and t.gemm.direct.side == "a" for t in wide.values())
    lib = KernelLibrary({name: (compute, t) for name, t in wide.items()}, tmp_path,
                        dict.fromkeys(wide, target), dict.fromkeys(wide, (1, 2)))
    inputs = [rand(t.shape) for t in compute.inputs]
    for name in wide:
        np.testing.assert_allclose(lib.run(name, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * 216)


@pytest.mark.parametrize(("co", "size", "kernel", "stride", "dilation"),
                         [(72, 13, 3, 2, 1), (96, 31, 3, 1, 2), (88, 9, 1, 2, 1), (65, 20, 3, 1, 1)])
def test_wide_kernels_read_in_place_as_a_match_the_interpreter(tmp_path: Path, co: int, size: int, kernel: int,
                                                               stride: int, dilation: int) -> None:
    """Every micro-kernel 3 or 4 vectors wide offered for positions read in place as A (fewer
    rows than the first, as many accumulators): strided and dilated windows, channels that
    leave a tail of a vector or of lanes, computes what the interpreter does."""
    target = cpu(16)
    pad = dilation * (kernel - 1) // 2
    compute = window_conv(1, 24, co, size, size, kernel, kernel, dilation, (pad,) * 4 if pad else None, stride)
    wide = {f"w{i}": t for i, (_, t) in enumerate(gemm_variants(compute, default_tile(compute, target), target, (1, 2)))
            if t.gemm is not None and t.gemm.mk.vectors > 2 and t.gemm.direct is not None and t.gemm.direct.side == "a"}
    assert wide
    lib = KernelLibrary({name: (compute, t) for name, t in wide.items()}, tmp_path,
                        dict.fromkeys(wide, target), dict.fromkeys(wide, (1, 2)))
    inputs = [rand(t.shape) for t in compute.inputs]
    for name in wide:
        np.testing.assert_allclose(lib.run(name, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * 216)


@pytest.mark.parametrize(("ci", "co", "size", "kernel", "stride"), [(48, 8, 40, 1, 1), (32, 12, 27, 3, 1),
                                                                    (24, 16, 33, 3, 2)])
def test_computed_weights_beside_patches_in_place_match_the_interpreter(tmp_path: Path, ci: int, co: int, size: int,
                                                                        kernel: int, stride: int) -> None:
    """Weights computed (a channel scale folded into them: frontend/fusion.py), so packed per
    call, small beside the map: every way offered (patches read in place as B, or as A with
    the weights packed as B, or gathered) computes what the interpreter does."""
    target = cpu(16)
    pad = (kernel - 1) // 2
    compute = window_conv(1, ci, co, size, size, kernel, kernel, 1, (pad,) * 4 if pad else None, stride)
    ways = {f"v{i}": t for i, (_, t) in enumerate(gemm_variants(compute, default_tile(compute, target), target, ()))
            if t.gemm is not None}
    assert any(t.gemm.direct is not None for t in ways.values())
    lib = KernelLibrary({name: (compute, t) for name, t in ways.items()}, tmp_path, dict.fromkeys(ways, target))
    inputs = [rand(t.shape) for t in compute.inputs]
    for name in ways:
        np.testing.assert_allclose(lib.run(name, inputs), evaluate(compute, inputs), rtol=1e-5,
                                   atol=1e-5 * ci * kernel * kernel)


@pytest.mark.parametrize("name", ["a_dilated_border_taps", "dilated_border_taps", "planes_dilated"])
def test_taps_that_read_only_padding_are_skipped(direct: KernelLibrary, name: str) -> None:
    """Border panels run the micro-kernel over their live taps' list (schedule/live_taps.py)."""
    assert "tf_live_class" in direct.sources[name] and "_live(nl, " in direct.sources[name]


@pytest.mark.parametrize("name", [n for n in DIRECT_CASES if not n.startswith("a_")])
def test_positions_read_in_place_as_b_store_each_block_as_it_is_done(direct: KernelLibrary, name: str) -> None:
    """Each block of the C tile is stored (post applied) right after the micro-kernel call
    of its last K block, while it is in L1, each channel's run inside an output row one
    loop; no pass over the task's whole tile follows."""
    source = direct.sources[name]
    assert "const int64_t rr = mv - ip * " in source and "for (int64_t l = 0, run; l < jn; l += run)" in source
    assert "for (int64_t i = 0; i < mv; ++i)" not in source and "for (int64_t q = n0, qe;" not in source
    assert ("if (k0 + kc >= 576L)" in source) == (name == "deep_k_blocks")


@pytest.mark.parametrize("name", ["batch2_row_tail", "planes_batch2", "silu_row_tail",
                                  "phases_stride2_batch2_row_tail", "deep_k_blocks"])
def test_the_tile_stored_after_the_last_k_block_matches_the_interpreter(tmp_path: Path, name: str) -> None:
    """The timed twin of storing each block as it is done (`tile_stores`): the task's C tile
    stored after its last K block, in runs inside an output row."""
    compute, lanes = DIRECT_CASES[name]
    tile = planned(compute, default_tile(compute, cpu(lanes)), cpu(lanes), (1, 2))
    assert tile.gemm is not None and tile.gemm.direct is not None and tile.gemm.direct.side == "b"
    tile = dataclasses.replace(tile, gemm=dataclasses.replace(tile.gemm, tile_stores=True))
    lib = KernelLibrary({name: (compute, tile)}, tmp_path, {name: cpu(lanes)}, {name: (1, 2)})
    source = lib.sources[name]
    assert "for (int64_t q = n0, qe; q < n0 + nv; q = qe)" in source and "rr = mv - ip" not in source
    inputs = [rand(t.shape) for t in compute.inputs]
    k = np.prod([a.extent for a in compute.reduce_axes])
    np.testing.assert_allclose(lib.run(name, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * k)


@pytest.mark.parametrize("name", [n for n in DIRECT_CASES if n.endswith("_rows_transposed")])
def test_positions_read_in_place_as_a_store_along_rows_in_whole_vectors(direct: KernelLibrary, name: str) -> None:
    assert "__builtin_shuffle" in direct.sources[name]  # the tile transposed in registers


@pytest.mark.parametrize("name", ["silu_row_tail", "silu_planes"])
def test_positions_read_in_place_store_a_transcendental_post_in_whole_vectors(direct: KernelLibrary,
                                                                              name: str) -> None:
    assert f"= {exp_function(8)}(" in direct.sources[name]  # the inlined vector exp, not libmvec's


@pytest.mark.parametrize(("compute", "lanes", "way"), [
    (window_conv(1, 32, 32, 32, 32, 3, 3), 16, "b rows"),  # 32 positions a row, 32 channels
    (window_conv(1, 64, 64, 56, 56, 3, 3), 16, "a rows"),  # 56 = 4 x 14 rows: no position wasted
    (window_conv(1, 256, 256, 14, 14, 3, 3), 16, "a rows"),
    (window_conv(1, 512, 512, 7, 7, 3, 3), 16, "a rows"),  # 7 rows of 512 channels
    (window_conv(1, 3, 64, 224, 224, 7, 7, pads=(3, 3, 3, 3), stride=2), 16, "a rows"),  # the stem: stride 2
    (window_conv(1, 64, 128, 56, 56, 3, 3, stride=2), 16, "a rows"),  # a down-sampling 3x3
    (window_conv(1, 16, 8, 64, 64, 3, 3, stride=2), 16, "b rows"),  # stride 2, 8 channels: phases
    (window_conv(1, 5, 6, 37, 37, 3, 3), 8, "b planes"),  # 6 channels fill no vector: positions do
    (window_conv(1, 16, 16, 20, 40, 1, 1, pads=None), 16, "b rows"),  # 1x1 in 25 whole panels: no copy
    (window_conv(1, 16, 16, 14, 14, 1, 1, pads=None), 16, "a rows"),  # 196 = 14 x 14 rows: no copy
])
def test_patches_are_read_in_place_where_the_model_says_it_pays(compute: Compute, lanes: int,
                                                                   way: str | None) -> None:
    """Gathered, or read in place as B or A (c/direct.py), as measured fastest on these
    (ResNet's 3x3 convolutions: A in place 858 / 860 / 863 / 869 us against 926 / 956 / 982
    / 1131 as B and 1090 / 1036 / 1112 / 1331 gathered; the stem 951 against 1254). Strided
    ones read as B through phases: the stem 2125 us against 1663 as A, 1954 gathered; a
    64-channel 3x3 on 56 x 56 at stride 2 886 against 933 as A, 1230 gathered (the model
    misses that one by 10%, and measuring decides); 8 channels from 16 on 64 x 64 34
    against 47 gathered (Sapphire Rapids, one thread)."""
    c, tile = merge_axes(compute, default_tile(compute, cpu(lanes)))
    m = gemm_contraction(c, cpu(lanes))
    assert m is not None
    d = gemm_blocking(c, m, tile, cpu(lanes), constant_inputs=(1, 2)).direct
    assert (None if d is None else f"{d.side} {'rows' if d.fold is None else 'planes'}") == way
    # weights computed, so packed per call: read as weights (and the patches perhaps in
    # place) only where they are small beside the patches (cpu_gemm.py `_weights_side`)
    small = side_extent(c, m.rows) * WEIGHTS_SHARE <= side_extent(c, m.cols)
    assert gemm_blocking(c, m, tile, cpu(lanes)).direct is None or small


def test_the_source_follows_the_planned_blocking(tmp_path: Path) -> None:
    """Codegen decides nothing: another blocking in the plan (micro-kernel, blocks, depth)
    is the one the source runs, and it still computes the product."""
    c = matmul(100, 96, 80)
    tile = planned(c, default_tile(c, CPU), CPU)
    g = tile.gemm
    assert g is not None and (g.mk.rows, g.mk.vectors, g.kc) != (4, 1, 32)
    other = dataclasses.replace(g, mk=MicroKernel(g.mk.lanes, 4, 1), mc=52, nc=48, kc=32)
    src = render_planned(c, dataclasses.replace(tile, gemm=other), "k", CPU)
    assert src != render_planned(c, tile, "k", CPU)
    assert "k0 += 32L" in src and "for (int64_t t = 0; t < 4L; ++t)" in src  # 2 x 2 tasks, 32 deep
    assert "c3_0" in src and "c4_0" not in src and "c0_1" not in src  # 4 rows x 1 vector
    lib = KernelLibrary({"k": (c, dataclasses.replace(tile, gemm=other))}, tmp_path, {"k": CPU})
    inputs = [rand(t.shape) for t in c.inputs]
    np.testing.assert_allclose(lib.run("k", inputs), evaluate(c, inputs), rtol=1e-5, atol=1e-5 * 80)


@pytest.mark.parametrize(("compute", "blocks"), [
    (matmul(100, 96, 80), (52, 32, 32)),  # 2 row blocks x 3 column blocks, 3 K blocks (the last 16 deep)
    (batched_matmul_broadcast(), (8, 8, 7)),  # 6 batch indices x 2 column blocks, each its own A
])
def test_a_thread_packs_a_once_for_the_column_blocks_of_its_rows(tmp_path: Path, compute: Compute,
                                                                   blocks: tuple[int, int, int]) -> None:
    """A packed per call is kept, every K block of it, while a thread's next task computes
    the same rows (and batch index): packed again only where the rows change."""
    tile = planned(compute, default_tile(compute, CPU), CPU)
    assert tile.gemm is not None
    mc, nc, kc = blocks
    g = dataclasses.replace(tile.gemm, mk=MicroKernel(8, 4, 1), mc=mc, nc=nc, kc=kc)
    assert keeps_a(g) and g.blocks[1] > 1
    src = render_planned(compute, dataclasses.replace(tile, gemm=g), "k", CPU)
    assert "if (a_fresh)" in src and f"a_at = t / {g.blocks[1]}L;" in src
    lib = KernelLibrary({"k": (compute, dataclasses.replace(tile, gemm=g))}, tmp_path, {"k": CPU})
    inputs = [rand(t.shape) for t in compute.inputs]
    k = np.prod([a.extent for a in compute.reduce_axes])
    np.testing.assert_allclose(lib.run("k", inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * k)


def test_a_packed_at_load_or_a_single_column_block_is_not_kept() -> None:
    c = matmul(100, 96, 80)
    g = planned(c, default_tile(c, CPU), CPU).gemm
    assert g is not None
    assert not keeps_a(dataclasses.replace(g, nc=96 * 2))  # one column block: nothing to keep it for
    packed = planned(c, default_tile(c, CPU), CPU, constant_inputs=(0,)).gemm
    assert packed is not None and "a" in {p.side for p in packed.packed} and not keeps_a(packed)


@pytest.mark.parametrize("lanes", [8, 16])
def test_the_next_b_panel_is_prefetched_where_b_comes_in_panels(lanes: int) -> None:
    """A line of the next B panel per k (a weight's panels stream from memory), from the
    calls over a panel in turn; none where B is read in place (offsets per k, no panels):
    there the lines that step k + IN_PLACE_AHEAD reads are prefetched instead, past the
    block's end those of the next panel (a panel's 32 positions on)."""
    c = matmul(64, 128, 96)
    src = render_planned(c, default_tile(c, cpu(lanes)), "k", cpu(lanes), constant_inputs=(1,))
    assert "__builtin_prefetch(pf + k * 16, 0, 2);" in src
    # a two-vector panel's row: 32 floats, two lines, on AVX-512; one line on AVX2
    assert ("ip % 2L * kc * 16L)" in src) == (lanes == 16)
    conv = window_conv(1, 32, 32, 32, 32, 3, 3)  # B read in place (see the test above)
    in_place = render_planned(conv, default_tile(conv, cpu(16)), "k", cpu(16), constant_inputs=(1, 2))
    assert "__builtin_prefetch(pf" not in in_place
    assert f"const int64_t ka = k + {IN_PLACE_AHEAD};" in in_place
    assert "(ka < kc ? koff[ka] : koff[ka - kc < kc ? ka - kc : kc - 1] + 32L)" in in_place  # on into the next panel


@pytest.mark.parametrize("lanes", [8, 16])
def test_a_full_micro_kernel_on_16_registers_reads_in_place_without_prefetching(tmp_path: Path, lanes: int) -> None:
    """With 16 vector registers a 6 x 2 micro-kernel holds all 12 accumulators, and GCC 12
    spilled one to the stack once the in-place prefetches' addresses were computed in its loop
    (the dilated segmenter's stride-2 convolution: 5.0 ms read in place, 3.2 gathered, one
    thread, Zen 3): there the plan prefetches nothing; with 32 registers it still does."""
    conv = window_conv(1, 32, 32, 32, 32, 3, 3)
    tile = planned(conv, default_tile(conv, cpu(lanes)), cpu(lanes), constant_inputs=(1, 2))
    g = tile.gemm
    assert g is not None and g.direct is not None and g.direct.side == "b"
    full = lanes == 8 and g.mk.rows * g.mk.vectors == 12
    assert lanes == 16 or full  # the case this test is about
    assert g.prefetch_in_place == (not full)
    src = render_planned(conv, tile, "k", cpu(lanes), constant_inputs=(1, 2))
    assert (f"const int64_t ka = k + {IN_PLACE_AHEAD};" in src) == (not full)
    if lanes == 8:  # runs on any x86-64 host of ours (AVX2 at least): the values stand
        lib = KernelLibrary({"k": (conv, tile)}, tmp_path, {"k": cpu(lanes)})
        inputs = [rand(t.shape) for t in conv.inputs]
        np.testing.assert_allclose(lib.run("k", inputs), evaluate(conv, inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("lanes", "vectors"), [(4, False), (8, True), (16, True)])
def test_whole_a_panels_are_packed_by_transposed_vectors(lanes: int, vectors: bool) -> None:
    """Rows contiguous along K are packed `lanes` k at a time, transposed in registers, where
    a panel's MR rows fit one vector (not SSE's 6 of 4 lanes); the CASES above check the
    values, tails and K blocks included."""
    c = matmul(64, 64, 96)
    src = render_planned(c, default_tile(c, cpu(lanes)), "k", cpu(lanes), constant_inputs=(1,))
    assert (f"kv += {lanes}L" in src) == vectors
    assert ("__builtin_shuffle" in src) == vectors


def gated_gelu_tanh(m: int, n: int, k: int) -> Compute:
    """T5's gated feed-forward as fused: GELU in its tanh form of x @ w, times a second input."""
    x = Var("acc", "float32")
    gelu = 0.5 * x * (1.0 + call("tanh", 0.7978845608 * (x + 0.044715 * x * x * x)))
    mm = matmul(m, n, k)
    return dataclasses.replace(mm, post=gelu * Load(2, (i0, i1), "float32"),
                               inputs=(*mm.inputs, TensorType((m, n), "float32")))


@pytest.mark.skipif(platform.machine() not in {"x86_64", "AMD64"}, reason="x86 listings")
@pytest.mark.parametrize(("lanes", "march"), [(8, "x86-64-v3"), (16, "x86-64-v4")])
def test_micro_kernels_keep_their_accumulators_in_registers_beside_a_heavy_epilogue(lanes: int, march: str) -> None:
    """The micro-kernels are functions of their own: inlined into the kernel, GCC 12 kept the
    epilogue's tanh constants in vector registers across them and spilled accumulators to
    the stack (T5's gated GELU, 128 x 1024 x 256: 356 stack accesses, 564 us against 350 for
    the plain product; the model 3.40 -> 2.92 ms at two threads, Zen 4)."""
    c = gated_gelu_tanh(128, 1024, 256)
    target = cpu(lanes)
    tile = planned(c, default_tile(c, target), target, constant_inputs=(1,))
    assert tile.gemm is not None
    src = render_planned(c, tile, "k", target, constant_inputs=(1,))
    micro = re.findall(r"^[0-9a-f]+ <(tf_micro[^>]*)>:\n(.*?)(?=^[0-9a-f]+ <|\Z)", listing(src, march), re.M | re.S)
    assert micro  # not inlined
    for name, body in micro:
        assert "(%rsp)" not in body, name
