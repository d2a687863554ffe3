"""The generated entry point: its exported ABI and what its source may contain."""

import ctypes
from pathlib import Path

import numpy as np
from handbuilt import artifact_files, graph, whole

from compiler.abi import ABI_VERSION, RUN_NULL_POINTER
from compiler.codegen.c.entry import render_entry
from compiler.schedule.planner import build_plan


def test_source_holds_no_model_strings_and_declares_shared_kernels_once():
    g = graph()
    hostile = '*/ system("x"); /*'
    for t in g.tensors.values():
        t.name = hostile
    # a second node with the MatMul's exact Compute: same key, so the same function
    mm = g.nodes[0]
    g.add_node("MatMul", mm.compute, mm.inputs, name=hostile)
    plan = build_plan(g, "cpu:test:0", whole)
    src = render_entry(plan)
    assert "system" not in src
    symbol = plan.kernels[0].symbol
    assert plan.kernels[-1].symbol == symbol
    assert src.count(f"void {symbol}_team(") == 1
    assert src.count(f"  {symbol}_team(") == 2
    assert plan.waves[0] == [0, 3]  # both MatMuls are ready at once


def test_exported_abi(tmp_path: Path):
    g = graph()
    plan = build_plan(g, "cpu:test:0", whole)
    so = tmp_path / "model.so"
    so.write_bytes(artifact_files(g, plan)["model.so"])
    lib = ctypes.CDLL(str(so))
    assert lib.tf_abi_version() == ABI_VERSION
    assert lib.tf_set_num_threads(2) == 1  # built with OpenMP
    assert lib.tf_set_num_threads(-1) == -1
    lib.tf_set_num_threads(0)
    ptrs = (ctypes.c_void_p * 2)()
    lib.tf_run.argtypes = [ctypes.c_void_p] * 4
    weights = np.zeros(plan.weights_bytes, np.uint8)
    # the plan uses an arena, so a null arena is refused before any kernel runs
    assert lib.tf_run(ptrs, ptrs, weights.ctypes.data, None) == RUN_NULL_POINTER
