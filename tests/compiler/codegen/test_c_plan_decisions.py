"""C codegen follows the decisions the plan records below the rTile (TileConfig.chunk,
.stage, .serial, .row_softmax, .row_reduction: compiler/schedule/cpu_tile.py): another decision in the
plan gives another source, which gcc builds and which still computes the right numbers;
and codegen holds none of the constants those decisions are made from."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary, planned, render_planned

import compiler.codegen
from compiler.codegen.c.kernel import build_machine, render_kernel
from compiler.ir.interp import evaluate
from compiler.ir.te import Axis, Compute, Load, TensorType, Var
from compiler.schedule.plan import TileConfig
from tests.compiler.codegen.test_c_kernels import (
    CPU,
    column_max,
    depthwise_wide,
    matmul,
    row_reduce,
)
from tests.compiler.codegen.test_c_rows import layer_norm, rows_tile, softmax

RNG = np.random.default_rng(15)

COLUMN_MAX = column_max(300, 37)
DEPTHWISE = depthwise_wide(16, 64)  # rows of whole vectors: micro-tiles, not planes (c/plane.py)
MATMUL = matmul(96, 80, 64)  # float32, but without a blocking in its tile: the loop path
SOFTMAX = softmax([7, 67])
ROW_SUM = row_reduce("sum", 24, 300)


def _plan(c: Compute, tile: TileConfig, **decisions: object) -> TileConfig:
    return dataclasses.replace(planned(c, tile, CPU), **decisions)


# name -> (compute, the planned tile, the same tile with one decision changed, a marker of
# the planned decision in the source)
VARIANTS = {
    "chunked": (COLUMN_MAX, TileConfig((37,), (16,), (70,), 8), {"chunk": 0}, "tacc"),
    "chunk_of_the_plan": (COLUMN_MAX, TileConfig((37,), (16,), (70,), 8), {"chunk": 40}, "r0 < c1"),
    "staged": (DEPTHWISE, TileConfig((1, 16, 64, 64), (1, 1, 4, 16), (3, 3), 8), {"stage": ()},
               "__attribute__((aligned(64)))"),
    "stage_of_the_plan": (DEPTHWISE, TileConfig((1, 16, 64, 64), (1, 1, 4, 16), (3, 3), 8),
                          {"stage": (1, 2, 64, 64)}, "__attribute__((aligned(64)))"),
    "plane": (depthwise_wide(20, 13), TileConfig((1, 20, 13, 13), (1, 1, 1, 13), (3, 3), 1), {"plane": None},
              "tf_pkoff"),
    "parallel": (MATMUL, TileConfig((32, 16), (4, 16), (64,), 8), {"serial": True}, "omp parallel"),
    "row_softmax": (SOFTMAX, rows_tile(SOFTMAX, 1, 3), {"row_softmax": False}, "_row(float"),
    "row_reduction": (ROW_SUM, TileConfig((8,), (4,), (300,), 8), {"row_reduction": False}, "int64_t rl = 0;"),
    "micro_tiles": (COLUMN_MAX, TileConfig((37,), (16,), (70,), 8), {"row_reduction": True, "chunk": 0}, "tacc"),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels: dict[str, tuple[Compute, TileConfig]] = {}
    for name, (c, tile, changed, _) in VARIANTS.items():
        kernels[f"{name}_planned"] = (c, planned(c, tile, CPU))
        kernels[f"{name}_changed"] = (c, _plan(c, tile, **changed))
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("decisions")), dict.fromkeys(kernels, CPU), plan=False)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_codegen_follows_the_decision_recorded_in_the_plan(library: KernelLibrary, name: str) -> None:
    c, _, _, marker = VARIANTS[name]
    planned_src = library.sources[f"{name}_planned"]
    changed_src = library.sources[f"{name}_changed"]
    assert planned_src != changed_src.replace(f"{name}_changed", f"{name}_planned")
    assert marker in planned_src
    inputs = [RNG.standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    want = evaluate(c, inputs)
    for variant in ("planned", "changed"):
        got = library.run(f"{name}_{variant}", inputs)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * 64)


def test_the_plan_records_the_decisions_and_round_trips_them() -> None:
    chunked = planned(COLUMN_MAX, VARIANTS["chunked"][1], CPU)
    staged = planned(DEPTHWISE, VARIANTS["staged"][1], CPU)
    row = planned(SOFTMAX, rows_tile(SOFTMAX, 1, 3), CPU)
    row_sum = planned(ROW_SUM, VARIANTS["row_reduction"][1], CPU)
    plane = planned(*VARIANTS["plane"][:2], CPU)
    assert plane.plane is not None and TileConfig.from_json(plane.to_json()) == plane
    assert (chunked.chunk, chunked.serial, chunked.row_reduction) == (70, True, False)
    assert row_sum.row_reduction and (row_sum.chunk, row_sum.stage) == (0, ())
    assert staged.stage == (1, 1, 32, 64) and not staged.serial
    assert row.row_softmax
    for tile in (chunked, staged, row, row_sum):
        assert TileConfig.from_json(tile.to_json()) == tile
    bare = TileConfig((37,), (16,), (70,), 8)
    assert bare.to_json() == {"block": [37], "thread": [16], "reduce_step": [70], "vector": 8}


def test_a_row_softmax_path_for_another_group_is_refused() -> None:
    c = layer_norm([7, 67])
    tile = _plan(c, rows_tile(c, 1, 3), row_softmax=True)
    with pytest.raises(ValueError, match="row softmax"):
        render_kernel(c, tile, "k", build_machine())
    assert "k_m0_" in render_planned(c, rows_tile(c, 1, 3), "k")


def test_a_row_reduction_path_for_an_element_wise_kernel_is_refused() -> None:
    c = Compute((Axis("i0", 64),), Load(0, (Var("i0"),), "float32") * 2.0, (TensorType((64,), "float32"),),
                "float32")
    tile = _plan(c, TileConfig((64,), (8,), (), 8), row_reduction=True)
    with pytest.raises(ValueError, match="row reduction"):
        render_kernel(c, tile, "k", build_machine())


DECIDING_NAMES = ("PARALLEL_MIN_FLOPS", "MIN_REDUCE_CHUNK", "MAX_TILE_ACC_BYTES", "MAX_SCRATCH_BYTES",
                  "staging_block", "staged_block", "is_row_softmax", "reduce_chunk", "runs_serially",
                  "reduces_rows", "MAX_PREFETCH", "prefetches")


def test_codegen_defines_none_of_the_decisions() -> None:
    for info in pkgutil.walk_packages(compiler.codegen.__path__, "compiler.codegen."):
        module = importlib.import_module(info.name)
        own = {n for n, v in vars(module).items() if getattr(v, "__module__", info.name) == info.name}
        assert not own & set(DECIDING_NAMES), info.name
