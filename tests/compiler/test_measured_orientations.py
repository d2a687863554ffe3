"""Measured top-k on a CPU (compiler/pipeline.py, compiler/backends/c.py): a convolution's
other GEMM orientations are timed beside its rTiles and the fastest runs (ties: the model's first); candidates that
render the same kernel are built and timed once."""

from __future__ import annotations

import json
from pathlib import Path

from compiler.bench.operators import _single, _w
from compiler.pipeline import compile_model
from compiler.schedule.measure import TIE, fastest


def test_orientations_are_measured_and_the_fastest_runs(tmp_path: Path) -> None:
    # 16 input channels: with more, Winograd's contractions would run, not one GEMM
    model = _single("Conv", [1, 16, 27, 27], {"w": _w(64, 16, 3, 3)}, ["x", "w"], pads=[1, 1, 1, 1])
    r = compile_model(model, "cpu", {"threads": 1}, output=tmp_path / "a.tar.gz")
    assert r.validation["passed"]
    (kernel,) = r.kernels
    cands = kernel["candidates"]
    assert all(c["measured_us"] is not None for c in cands)
    ways = {json.dumps([c["tile"]["gemm"]["swapped"], c["tile"]["gemm"]["direct"]]) for c in cands}
    assert len(ways) >= 2  # more than the model's one orientation was timed
    # the fastest runs, or the model's first of those tied with it (measure.TIE)
    times = [c["measured_us"] for c in cands]
    assert kernel["measured_us"] == times[fastest(times)] <= min(times) * (1 + TIE)
    # rTiles the GEMM path blocks alike render one kernel: timed once, so the same time
    by_gemm: dict[str, set[float]] = {}
    for c in cands:
        by_gemm.setdefault(json.dumps(c["tile"]["gemm"], sort_keys=True), set()).add(c["measured_us"])
    assert len(by_gemm) < len(cands) and all(len(times) == 1 for times in by_gemm.values())
