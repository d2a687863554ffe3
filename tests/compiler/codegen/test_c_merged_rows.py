"""Element-wise kernels over small maps (c/kernel.py merges the axes every tensor walks as
one run): a SiLU over [64, 7, 7] runs the target's vectors over the whole tensor, with the
inlined vector exp, not scalar expf over rows of 7 (0.16x onnxruntime on EfficientNet's
7 x 7 stages); the numbers match the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from c_harness import KernelLibrary
from onnx import helper

from compiler.codegen.c.vector_math import exp_function
from compiler.frontend import import_model
from compiler.ir.interp import evaluate
from compiler.ir.te import Compute
from compiler.schedule.plan import TileConfig
from compiler.schedule.tilegraph.registers import fuse
from compiler.target import get_target
from tests.compiler.schedule.test_fuse import model


def silu(shape: list[int]) -> Compute:
    m = model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])],
              [("x", shape)], ["y"])
    (node,) = fuse(import_model(m.SerializeToString())).nodes
    return node.compute


def test_a_small_map_runs_the_targets_vectors_over_the_merged_axes(tmp_path: Path) -> None:
    c = silu([1, 64, 7, 7])
    tile = TileConfig((1, 16, 7, 7), (1, 1, 1, 1), (), 1)  # the planner's vector for rows of 7
    lib = KernelLibrary({"k": (c, tile)}, tmp_path, targets={"k": get_target("cpu:x86-64-v3")}, plan=False)
    assert exp_function(8) in lib.sources["k"]  # AVX2's 8 lanes, over runs of 16 x 7 x 7
    x = np.random.default_rng(3).standard_normal(c.inputs[0].shape).astype(np.float32) * 4
    np.testing.assert_allclose(lib.run("k", [x]), evaluate(c, [x]), rtol=2e-6, atol=1e-7)
