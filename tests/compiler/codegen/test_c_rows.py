"""C kernels of fused row groups agree with the TE interpreter: blocks that divide the rows
and blocks that leave a shorter last one, one and two row axes, inputs read whole (the
last-axis softmax cases take c/softmax.py's row kernel; the middle-axis one the members)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary, render_planned
from onnx import helper

from compiler.frontend import import_model
from compiler.ir.interp import evaluate
from compiler.ir.rows import group_sharing
from compiler.ir.te import Compute
from compiler.schedule.plan import TileConfig
from compiler.schedule.tilegraph.registers import fuse
from compiler.schedule.tilegraph.rows import fuse_rows
from compiler.schedule.tilegraph.rowtile import row_group_tilings
from compiler.target.cpu import detect_cpu
from tests.compiler.schedule.test_fuse import model

RNG = np.random.default_rng(11)


def group(nodes, inputs, inits=()) -> Compute:
    graph = fuse_rows(fuse(import_model(model(nodes, inputs, ["y"], inits).SerializeToString())))
    (node,) = graph.nodes
    assert node.compute.stages
    return node.compute


def softmax(shape: list[int], axis: int = -1) -> Compute:
    return group([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], [("x", shape)])


def layer_norm(shape: list[int]) -> Compute:
    n = shape[-1]
    inits = [("g", RNG.standard_normal(n).astype(np.float32)), ("b", RNG.standard_normal(n).astype(np.float32))]
    return group([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)], [("x", shape)], inits)


def residual_layer_norm(shape: list[int]) -> Compute:
    """Add then layer norm, the Add reading both its inputs through broadcast indices (0 on
    a unit batch axis): the rows are still every axis before the normalized one."""
    n = shape[-1]
    inits = [("g", RNG.standard_normal(n).astype(np.float32)), ("b", RNG.standard_normal(n).astype(np.float32))]
    return group([helper.make_node("Add", ["x", "r"], ["s"]),
                  helper.make_node("LayerNormalization", ["s", "g", "b"], ["y"], axis=-1)],
                 [("x", shape), ("r", shape)], inits)


def rows_tile(c: Compute, rows: int, block: int) -> TileConfig:
    """A tile of `block` rows per task along the innermost of `rows` row axes."""
    return TileConfig((1,) * (rows - 1) + (block,) + c.shape[rows:], (1,) * len(c.axes), (1,) * len(c.reduce_axes), 8)


CASES = {
    "softmax_blocks_divide": (softmax([8, 40]), 1, 4),
    "softmax_shorter_last_block": (softmax([7, 67]), 1, 3),
    "softmax_one_row_per_task": (softmax([5, 16]), 1, 1),
    "softmax_middle_axis": (softmax([3, 6, 5], axis=1), 1, 1),
    "layer_norm_two_row_axes": (layer_norm([3, 10, 24]), 2, 4),
    "residual_layer_norm_unit_batch": (residual_layer_norm([1, 10, 24]), 2, 4),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {name: (c, rows_tile(c, rows, block)) for name, (c, rows, block) in CASES.items()}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("rowkernels")))


@pytest.mark.parametrize("name", list(CASES))
def test_group_kernel_matches_interpreter(library: KernelLibrary, name: str) -> None:
    c = CASES[name][0]
    inputs = [RNG.standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    np.testing.assert_allclose(library.run(name, inputs), evaluate(c, inputs), rtol=1e-5, atol=1e-6)


def test_a_unit_batch_axis_read_at_zero_still_leaves_the_sequence_as_rows() -> None:
    c = CASES["residual_layer_norm_unit_batch"][0]
    sharing = group_sharing(c)
    assert sharing.rows == 2 and sharing.by_rows[:2] == (True, True)  # 10 rows, not 1


def test_members_run_on_the_block_and_stages_live_in_scratch() -> None:
    c = layer_norm([7, 67])  # (a last-axis softmax has a kernel of its own: c/softmax.py)
    src = render_planned(c, rows_tile(c, 1, 3), "k")
    # one copy of every member per block size (3 rows, then the last 1), stages on the stack
    assert all(f"k_m{m}_{n}(" in src for m in range(len(c.stages) + 1) for n in (3, 1))
    assert "float s0[3] __attribute__((aligned(64)));" in src


def test_rows_per_task_fit_half_of_l2_and_are_ranked_by_the_model() -> None:
    target = detect_cpu()
    c = softmax([256, 4096])
    tilings = row_group_tilings(c, target, top_k=100)
    row = 4096 * 4 * 2 + 4096 * 4 + 8  # input, output and exp rows, two scalars
    assert all(t.block[0] * row <= target.level("l2").capacity // 2 or t.block[0] == 1 for t, _ in tilings)
    times = [e.time_us for _, e in tilings]
    assert times == sorted(times) and len(tilings) > 1
