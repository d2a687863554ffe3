"""CUDA row groups whose rows are too long for their stages in shared memory: the readers
recompute the element-wise stages (compiler/ir/recompute.py) as the plan says
(`RowGroupGeometry.recomputed`), so a softmax over 12,000 classes is one kernel; it
matches the TE interpreter on the CPU emulator and compiles with nvcc."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from cuda_cases import GPU, check_close
from cuda_emulator import EmulatedKernels
from onnx import helper

from compiler.build.nvcc import compile_cubin
from compiler.codegen.cuda.kernel import render_kernel
from compiler.frontend import import_model
from compiler.ir.interp import evaluate
from compiler.ir.rows import group_sharing, stage_row_bytes
from compiler.ir.te import Compute
from compiler.schedule.cuda_launch import RowGroupGeometry
from compiler.schedule.cuda_tile import ROW_STAGE_BYTES, plan_cuda_tile, row_group_fits
from compiler.schedule.plan import TileConfig
from compiler.schedule.tilegraph.registers import fuse
from compiler.schedule.tilegraph.rows import fuse_rows
from compiler.schedule.tilegraph.rowtile import row_group_tilings
from compiler.target.toolchain import find_tool
from tests.compiler.schedule.test_fuse import model


def softmax_group(shape: list[int]) -> Compute:
    """Softmax over the last axis, grouped by the CUDA backend's row rule."""
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", shape)], ["y"])
    (node,) = fuse_rows(fuse(import_model(m.SerializeToString())), fits=row_group_fits).nodes
    assert node.compute.stages
    return node.compute


LONG, SHORT = softmax_group([3, 12000]), softmax_group([4, 300])


def _planned(c: Compute) -> TileConfig:
    return plan_cuda_tile(c, row_group_tilings(c, GPU, 1)[0][0])


def test_only_a_row_too_long_for_shared_memory_recomputes_its_stages() -> None:
    assert stage_row_bytes(LONG, group_sharing(LONG)) > ROW_STAGE_BYTES
    long_tile, short_tile = _planned(LONG), _planned(SHORT)
    assert long_tile.launch is not None and short_tile.launch is not None
    assert long_tile.launch.geometry == RowGroupGeometry(1024, 3, (1,))  # the exponentials
    assert short_tile.launch.geometry == RowGroupGeometry(64, 4)
    assert TileConfig.from_json(long_tile.to_json()) == long_tile
    src = render_kernel(LONG, long_tile, "k")
    assert "s1[" not in src and src.count("expf(") == 2  # for the sum, and for the scaling


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")
def test_emulated_long_softmax_matches_the_interpreter(tmp_path: Path) -> None:
    kernels = EmulatedKernels({"k_long": (LONG, _planned(LONG)), "k_short": (SHORT, _planned(SHORT))}, tmp_path)
    rng = np.random.default_rng(2)
    for name, c in (("k_long", LONG), ("k_short", SHORT)):
        x = (rng.standard_normal(c.inputs[0].shape) * 5).astype(np.float32)
        check_close(kernels.run(name, [x]), evaluate(c, [x]), c)


@pytest.mark.nvcc
@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc (the CUDA toolkit) is not installed")
def test_compiles_for_sm_80_and_sm_90() -> None:
    source = render_kernel(LONG, _planned(LONG), "k_long")
    with ThreadPoolExecutor(2) as pool:
        for cubin in pool.map(lambda arch: compile_cubin(source, arch), ("sm_80", "sm_90")):
            assert cubin[:4] == b"\x7fELF" and b"k_long\0" in cubin
