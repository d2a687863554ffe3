"""Convolutions read in place whose tasks split only the positions copy each task's input
rows into their thread's own scratch (c/direct.py `write_task_copy`): tasks of one panel
(inside a line) and of two (across lines), at one and two threads, over rows, planes,
polyphase columns and border taps, so that every way a task's rows start at row 0 of
its thread's copy, share rows with the task before and reach the last row of a channel
is run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary, planned
from test_c_gemm import cpu, window_conv
from test_c_kernels import rand

from compiler.ir.interp import evaluate
from compiler.ir.te import Compute
from compiler.schedule.plan import TileConfig
from compiler.schedule.tiling import default_tile

OWN_COPY = "const int64_t hs = r0 * "  # the task copy's mark in the source
SHARED_COPY = "copyprivate(pad)"

CASES: dict[str, tuple[Compute, int]] = {
    "rows": (window_conv(1, 5, 8, 20, 37, 3, 3), 8),  # 37 = 16 + 16 + 5: tasks split rows
    "planes": (window_conv(1, 4, 6, 21, 13, 3, 3), 8),  # a plane walked at period 15
    "phases_dilated_border": (window_conv(1, 4, 6, 12, 41, 3, 3, dilation=3, pads=(3, 3, 3, 3), stride=2), 8),
    "dilated_border_rows_trimmed": (window_conv(1, 4, 6, 12, 40, 3, 3, dilation=6, pads=(6, 6, 6, 6)), 8),
    "a_stride2": (window_conv(1, 5, 32, 17, 17, 3, 3, stride=2), 16),
    "a_dilated_border": (window_conv(1, 8, 32, 12, 12, 3, 3, dilation=5, pads=(5, 5, 5, 5)), 16),
}


def panel_tasks(c: Compute, lanes: int, panels: int = 1) -> TileConfig:
    """The planned tile with tasks of `panels` panels of positions and one tile of channels."""
    tile = planned(c, default_tile(c, cpu(lanes)), cpu(lanes), (1, 2))
    g = tile.gemm
    assert g is not None and g.direct is not None and g.batch == 1
    if g.direct.side == "b":
        g = dataclasses.replace(g, mc=-(-g.m // g.mk.rows) * g.mk.rows, nc=panels * g.mk.cols)
    else:
        g = dataclasses.replace(g, nc=-(-g.n // g.mk.cols) * g.mk.cols, mc=panels * g.mk.rows)
    return dataclasses.replace(tile, gemm=g)


@pytest.fixture(scope="module", params=[1, 2], ids=["1-panel", "2-panels"])
def library(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {name: (c, panel_tasks(c, lanes, request.param)) for name, (c, lanes) in CASES.items()}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("task_copy")),
                         {name: cpu(lanes) for name, (_, lanes) in CASES.items()},
                         {name: (1, 2) for name in CASES})


@pytest.mark.parametrize("name", list(CASES))
def test_each_task_copies_its_rows_and_matches_the_interpreter(library: KernelLibrary, threads: int,
                                                               name: str) -> None:
    compute, _ = CASES[name]
    source = library.sources[name]
    assert OWN_COPY in source and SHARED_COPY not in source
    assert "for (int64_t t = 0; t < 1L; ++t)" not in source  # many tasks
    inputs = [rand(t.shape) for t in compute.inputs]
    k = np.prod([a.extent for a in compute.reduce_axes])
    np.testing.assert_allclose(library.run(name, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * k)


def test_tasks_that_split_channels_or_images_share_one_copy(tmp_path: Path) -> None:
    """Where tasks split the other side too, or a side walks a batch of images, their rows
    would be copied by several tasks: the team copies the input once, as before."""
    images = window_conv(2, 5, 6, 9, 37, 3, 3)
    channels = window_conv(1, 5, 32, 20, 37, 3, 3)
    tile = panel_tasks(channels, 8)
    assert tile.gemm is not None
    split = dataclasses.replace(tile, gemm=dataclasses.replace(tile.gemm, mc=tile.gemm.mk.rows))
    lib = KernelLibrary({"images": (images, default_tile(images, cpu(8))), "channels": (channels, split)},
                        tmp_path, {"images": cpu(8), "channels": cpu(8)}, {"images": (1, 2), "channels": (1, 2)})
    for name, c in (("images", images), ("channels", channels)):
        assert SHARED_COPY in lib.sources[name] and OWN_COPY not in lib.sources[name]
        inputs = [rand(t.shape) for t in c.inputs]
        k = np.prod([a.extent for a in c.reduce_axes])
        np.testing.assert_allclose(lib.run(name, inputs), evaluate(c, inputs), rtol=1e-5, atol=1e-5 * k)
