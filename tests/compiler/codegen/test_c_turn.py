"""Element-wise kernels that read across their innermost axis (c/turn.py): tiles computed
along a contiguous axis and turned in registers agree with the TE interpreter, at every
edge a tile can leave (partial squares on either axis), for 4, 8 and 16 lanes, and for a
Concat turned piece by piece (compiler/ir/index_split.py); bodies
contiguous along the innermost axis keep the plain vector loop."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary
from onnx import helper

from compiler.codegen.c.kernel import render_kernel
from compiler.codegen.c.turn import turned_axis, zipped_axis
from compiler.frontend import import_model
from compiler.ir.interp import evaluate
from compiler.ir.te import Compute
from compiler.schedule.plan import TileConfig
from compiler.schedule.tilegraph.registers import fuse
from compiler.target import get_target
from tests.compiler.schedule.test_fuse import model

RNG = np.random.default_rng(5)


def kernel(nodes, inputs) -> Compute:
    (node,) = fuse(import_model(model(nodes, inputs, ["y"]).SerializeToString())).nodes
    return node.compute


def transpose(shape: list[int], perm: list[int]) -> Compute:
    return kernel([helper.make_node("Transpose", ["x"], ["y"], perm=perm)], [("x", shape)])


def transpose_sigmoid_add(shape: list[int], added: list[int]) -> Compute:
    """A transpose of the last two axes, its sigmoid, plus a tensor of shape `added`."""
    return kernel([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
                   helper.make_node("Sigmoid", ["t"], ["s"]), helper.make_node("Add", ["s", "r"], ["y"])],
                  [("x", shape), ("r", added)])


def concat_transpose(widths: list[int], channels: int) -> Compute:
    """Maps of `widths` positions concatenated, then turned to [positions, channels]
    (YOLO's detection head): a select chain over the parts, each read at a clamped index."""
    names = [f"x{k}" for k in range(len(widths))]
    return kernel([helper.make_node("Concat", names, ["c"], axis=2),
                   helper.make_node("Transpose", ["c"], ["y"], perm=[0, 2, 1])],
                  [(name, [1, channels, w]) for name, w in zip(names, widths, strict=True)])


def tile(c: Compute, block: list[int], lanes: int) -> TileConfig:
    return TileConfig(tuple(block), (1,) * len(block), (), lanes)


CASES = {
    # name: (compute, task block, lanes)
    "yolo_head_16": (transpose([1, 255, 1344], [0, 2, 1]), [1, 128, 255], 16),
    "ragged_both_axes_8": (transpose([2, 37, 45], [0, 2, 1]), [1, 20, 45], 8),
    "nchw_to_nhwc_4": (transpose([1, 6, 5, 7], [0, 2, 3, 1]), [1, 5, 7, 6], 4),
    # the turned axis (width) and the innermost (channels) with an axis between them
    "axis_between_8": (transpose([2, 11, 3, 20], [0, 3, 2, 1]), [1, 20, 3, 11], 8),
    "rank2_16": (transpose([40, 33], [1, 0]), [33, 40], 16),
    # rows of 40 channels in tasks of 18: 16 + an overlapping square, twice, then 4 scalar
    "last_square_overlaps_16": (transpose([1, 40, 36], [0, 2, 1]), [1, 16, 18], 16),
    # parts of 20, 5 and 13 positions: pieces a square wide, narrower, straddling tasks
    "concat_parts_8": (concat_transpose([20, 5, 13], 19), [1, 12, 19], 8),
    "yolo_head_concat_16": (concat_transpose([1024, 256, 64], 255), [1, 128, 255], 16),
    # a per-position bias: constant along the innermost axis, contiguous along the turned one
    "with_math_and_a_broadcast_input_8": (transpose_sigmoid_add([1, 19, 26], [1, 26, 1]), [1, 26, 19], 8),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {name: (c, tile(c, block, lanes)) for name, (c, block, lanes) in CASES.items()}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("turn")), plan=False)


@pytest.mark.parametrize("name", list(CASES))
def test_turned_tiles_match_the_interpreter(library: KernelLibrary, name: str) -> None:
    c, block, lanes = CASES[name]
    assert turned_axis(c, block, lanes) is not None
    assert "__builtin_shuffle" in library.sources[name]
    inputs = [RNG.standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    np.testing.assert_allclose(library.run(name, inputs), evaluate(c, inputs), rtol=1e-6, atol=1e-7)


def test_bodies_contiguous_along_the_innermost_axis_are_not_turned() -> None:
    c = transpose([4, 32, 48], [1, 0, 2])  # the innermost axis stays innermost
    assert turned_axis(c, [32, 4, 48], 16) is None
    assert "__builtin_shuffle" not in render_kernel(c, tile(c, [32, 4, 48], 16), "k")


def test_a_body_that_also_reads_along_the_innermost_axis_is_not_turned() -> None:
    c = transpose_sigmoid_add([1, 19, 26], [1, 26, 19])  # the added tensor is strided along the other axis
    assert turned_axis(c, [1, 26, 19], 8) is None


def test_a_task_narrower_than_a_vector_is_not_turned() -> None:
    c = transpose([1, 255, 1344], [0, 2, 1])
    assert turned_axis(c, [1, 8, 255], 16) is None  # 8 positions per task: no square of 16
    assert turned_axis(c, [1, 128, 8], 16) is None


def upsampling_interleave(stride: int, channels: int, size: int) -> Compute:
    """The interleave of a ConvTranspose whose kernel equals its stride (UNet's 2x2
    upsampling): the phase convolutions' outputs, over the spatial axes split into
    (position, phase): its innermost axis is the width's `stride` phases."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((channels, 3, stride, stride)).astype(np.float32)
    m = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[stride, stride],
                                kernel_shape=[stride, stride])], [("x", [1, channels, size, size])], ["y"], [("w", w)])
    (node,) = [n for n in fuse(import_model(m.SerializeToString())).nodes if not n.compute.is_reduction]
    return node.compute


def nearest_upsampling(scale: int, channels: int, size: int) -> Compute:
    """A nearest-neighbour Resize by an integer `scale` (YOLO's and FPN's upsampling): over
    [..., width, scale], each position reading the same input column."""
    s = np.array([1, 1, scale, scale], np.float32)
    m = model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")],
              [("x", [1, channels, size, size])], ["y"], [("s", s)])
    (node,) = fuse(import_model(m.SerializeToString())).nodes
    return node.compute


ZIPPED = {
    # name: (compute, target preset whose lanes the kernel is rendered for, task block or
    # None for one task); 13 positions per row leave a partial vector at each row's end (its
    # last whole vector computed again); in tasks of 8 positions, the second task's 5 are
    # shorter than an AVX2 vector (scalar)
    "phases_2_avx2": (upsampling_interleave(2, 4, 13), "cpu:x86-64-v3", None),
    "phases_4_avx2": (upsampling_interleave(4, 2, 13), "cpu:x86-64-v3", None),
    "phases_2_sse": (upsampling_interleave(2, 4, 13), "cpu:x86-64-v2", None),
    "phases_2_avx2_tasks_of_8": (upsampling_interleave(2, 4, 13), "cpu:x86-64-v3", [1, 4, 13, 2, 8, 2]),
    "nearest_2_avx512": (nearest_upsampling(2, 3, 21), "cpu:x86-64-v4", None),
    "nearest_4_avx2": (nearest_upsampling(4, 2, 11), "cpu:x86-64-v3", None),
}


@pytest.fixture(scope="module")
def zipped_library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {name: (c, tile(c, block or [a.extent for a in c.axes], 1)) for name, (c, _, block) in ZIPPED.items()}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("zip")),
                         targets={name: get_target(preset) for name, (_, preset, _) in ZIPPED.items()}, plan=False)


@pytest.mark.parametrize("name", list(ZIPPED))
def test_zipped_phases_match_the_interpreter(zipped_library: KernelLibrary, name: str) -> None:
    c, preset, block = ZIPPED[name]
    assert zipped_axis(c, block or [a.extent for a in c.axes], get_target(preset).lanes) is not None
    assert "__builtin_shuffle" in zipped_library.sources[name]
    inputs = [RNG.standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    np.testing.assert_allclose(zipped_library.run(name, inputs), evaluate(c, inputs), rtol=0, atol=0)


def test_a_partial_vector_at_a_rows_end_is_computed_as_the_last_whole_one(zipped_library: KernelLibrary) -> None:
    """13 positions a row in vectors of 8 (AVX2) or 4 (SSE): the tail is the vector ending
    at the row's end, not a scalar loop (Winograd's 28-tile rows ran 43% of their outputs scalar)."""
    for name, lanes in (("phases_2_avx2", 8), ("phases_4_avx2", 8), ("phases_2_sse", 4)):
        assert re.search(rf"if \(u\d+ < e(\d+) && e\1 >= {lanes}L\)", zipped_library.sources[name]), name
