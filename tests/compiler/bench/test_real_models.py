"""The real-model suite: the registry covers what issue 17 asks for (no torch needed), its
section is spliced into BENCHMARKS.md in place, and, where torch is installed, a small model
exports with both exporters, caches, compiles, validates and times against onnxruntime."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from compiler.bench.real_models import FAMILIES, GPU, MODELS, REAL, REQUIRED_FEATURES, suite
from compiler.bench.real_suite import HEADING, geomean
from compiler.bench.sections import splice

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the `bench` extra installs it)")


def test_the_suite_has_24_architectures_covering_every_required_feature() -> None:
    real = suite(REAL)
    assert len(real) >= 24
    covered = {f for m in real for f in m.features}
    assert covered >= REQUIRED_FEATURES, REQUIRED_FEATURES - covered
    assert {m.family for m in real} == set(FAMILIES)
    assert all(m.exporters for m in real)
    assert sum(len(m.exporters) == 2 for m in real) >= 4  # a representative subset with both exporters


def test_every_builder_names_a_function_of_a_bench_module() -> None:
    for m in MODELS.values():
        module, fn = m.builder.split(":")
        assert module.startswith("compiler.bench.") and fn.isidentifier(), m.builder
    assert {m.name for m in suite(GPU)} >= {"bert_encoder", "mlp"}


def test_splice_replaces_the_section_in_place_and_inserts_it_before_the_gpu_one() -> None:
    doc = "# Benchmarks\n\n## Models\n\nzoo\n\n## GPU\n\ngpu table\n"
    first = splice(doc, ["", HEADING, "", "old table"])
    assert first == "# Benchmarks\n\n## Models\n\nzoo\n\n" + HEADING + "\n\nold table\n\n## GPU\n\ngpu table\n"
    again = splice(first, ["", HEADING, "", "new table"])
    assert again == first.replace("old table", "new table")
    assert splice("# Benchmarks\n", ["", HEADING]) == "# Benchmarks\n\n" + HEADING + "\n"
    compile_time = ["", "## Compile time (CLI, validation included)", "", "new times"]  # any section
    doc = "# Benchmarks\n\n## Compile time (CLI, validation included)\n\nold times\n\n" + HEADING + "\n\nt\n"
    assert splice(doc, compile_time) == doc.replace("old times", "new times")
    # a section whose lines start at its heading keeps the line above it, blank or not
    doc = "# Benchmarks\n\nops table\nmedian line\n## Attention\n\nold\n\n## GPU\n\ng\n"
    assert splice(doc, ["## Attention", "", "new"]) == doc.replace("old", "new")
    # ... and the section above it, rerun, replaces its own last line (it was kept, and
    # BENCHMARKS.md gathered a stale median line under the operator table)
    doc = "# Benchmarks\n\n## Operators\n\nops\nmedian old\n## Attention\n\na\n"
    assert splice(doc, ["", "## Operators", "", "ops 2", "median new"]) == (
        "# Benchmarks\n\n## Operators\n\nops 2\nmedian new\n\n## Attention\n\na\n")


def test_geomean() -> None:
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([]) is None


@needs_torch
@pytest.mark.slow
def test_a_small_model_exports_with_both_exporters_validates_and_times(tmp_path: Path) -> None:
    from compiler.bench.real_export import cache_path, exported
    from compiler.bench.real_suite import bench_one, section

    lstm = MODELS["lstm"]
    for exporter in lstm.exporters:
        data = exported(lstm, exporter, tmp_path)
        assert cache_path(lstm, exporter, tmp_path).read_bytes() == data  # exported once, then cached
    row = bench_one(lstm, lstm.exporters[0], [1], tmp_path)
    assert row.status == "ok", row.error
    r = row.results[1]
    assert r.rel_l2_error < 1e-4 and r.tileforge_ms > 0 and r.onnxruntime_ms > 0
    assert row.gflop and row.gflop > 0.05  # 2 layers x 64 steps x 4 gates of 256x(128|256)+256x256 MACs
    assert any(k.get("measured_us") for k in r.kernel_times)
    text = "\n".join(section([row], [1], peak=1e11))
    assert "| lstm | other | torch.nn | dynamo | ok |" in text


@needs_torch
def test_a_model_that_cannot_export_gets_a_row_saying_why(tmp_path: Path) -> None:
    from compiler.bench.real_models import RealModel
    from compiler.bench.real_suite import bench_one

    broken = RealModel("broken", "other", "tileforge", "compiler.bench.torch_nets:no_such_builder")
    row = bench_one(broken, "dynamo", [1], tmp_path)
    assert row.status == "export failed" and row.error.startswith("AttributeError")
    assert not row.results


@needs_torch
def test_a_model_is_benched_in_a_process_of_its_own(tmp_path: Path) -> None:
    """The suite runs each model in a spawned process (`bench_isolated`): its row, failures
    included, comes back whole."""
    from compiler.bench.real_models import RealModel
    from compiler.bench.real_suite import bench_isolated

    broken = RealModel("broken", "other", "tileforge", "compiler.bench.torch_nets:no_such_builder")
    row = bench_isolated(broken, "dynamo", [1], tmp_path)
    assert (row.model, row.exporter, row.status) == (broken, "dynamo", "export failed")
    assert row.error.startswith("AttributeError") and not row.results


def test_the_flop_count_is_the_models_not_a_lowerings() -> None:
    """A 3x3 convolution the default guess runs as Winograd still counts its direct
    multiply-adds: 2 per tap that reads the input (not the padding)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from compiler.bench.real_suite import model_flops

    c, side = 64, 28
    w = numpy_helper.from_array(np.zeros((c, c, 3, 3), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, side, side])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, side, side])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    taps = (3 * side - 2) ** 2  # (output, tap) pairs inside the input, both axes
    assert model_flops(model.SerializeToString()) == pytest.approx(2 * c * c * taps, rel=0.02)
