"""Convolution patches gathered into panels as A, the sides swapped (compiler/schedule/
cpu_gemm.py `orientations`): output positions broadcast from compact panels, channels in
the vectors, outputs stored across the channels. Timed beside reading the patches in place
where lines ending mid-panel make that compute many dropped positions (small maps); here
each such variant is rendered and run against the interpreter, at one and two threads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary
from test_c_gemm import cpu, window_conv
from test_c_kernels import rand

from compiler.ir.interp import evaluate
from compiler.ir.te import Compute
from compiler.schedule.cpu_tile import cpu_tile_variants, plan_cpu_tile
from compiler.schedule.plan import TileConfig
from compiler.schedule.tiling import default_tile

CASES: dict[str, tuple[Compute, int]] = {
    "map_7x7": (window_conv(1, 24, 32, 7, 7, 3, 3), 8),  # 49 positions: 56 in place in panels of 4
    "stride2_odd": (window_conv(1, 8, 16, 13, 13, 3, 3, stride=2), 8),
    "dilated_border": (window_conv(1, 8, 16, 7, 7, 3, 3, dilation=2, pads=(2, 2, 2, 2)), 8),
    "avx512_map_5x5": (window_conv(1, 8, 32, 5, 5, 3, 3), 16),
    "batch2": (window_conv(2, 8, 16, 7, 7, 3, 3), 8),
}


def gathered_as_a(c: Compute, lanes: int) -> TileConfig:
    """The variant that gathers the patches as A (sides swapped, nothing read in place)."""
    target, tile = cpu(lanes), default_tile(c, cpu(lanes))
    ways = [plan_cpu_tile(c, tile, target, (1, 2)), *(t for _, t in cpu_tile_variants(c, tile, target, (1, 2)))]
    (gathered,) = [t for t in ways if t.gemm is not None and t.gemm.swapped and t.gemm.direct is None]
    return gathered


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {name: (c, gathered_as_a(c, lanes)) for name, (c, lanes) in CASES.items()}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("gathered_a")),
                         {name: cpu(lanes) for name, (_, lanes) in CASES.items()},
                         {name: (1, 2) for name in CASES})


@pytest.mark.parametrize("name", list(CASES))
def test_patches_gathered_as_a_match_the_interpreter(library: KernelLibrary, threads: int, name: str) -> None:
    compute, lanes = CASES[name]
    g = gathered_as_a(compute, lanes).gemm
    assert g is not None
    # compact panels: the positions rounded up to whole micro-kernels, nothing past a line's end
    positions = int(np.prod([a.extent for d, a in enumerate(compute.axes) if d != 1]))  # images x map
    assert g.m == positions and -(-g.mc // g.mk.rows) * g.mk.rows == g.mc
    inputs = [rand(t.shape) for t in compute.inputs]
    k = np.prod([a.extent for a in compute.reduce_axes])
    np.testing.assert_allclose(library.run(name, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * k)
