"""CUDA C++ code generation: one `extern "C" __global__` kernel per Compute.

The kernel ABI is the plan's (compiler/schedule/plan.py): the output pointer
first, then one pointer per Compute input, all dense row-major. Which kernel
shape a Compute gets is decided here, from the Compute and its TileConfig alone,
so `render_kernel` and `launch_dims` always agree:

- contraction (`sum(x * y)` with both operands owning spatial axes: matmul,
  batched matmul, implicit-GEMM convolution): shared-memory tiled GEMM
  (`cuda_contraction`, `cuda_gemm`, `cuda_gemm_stage`);
- long reduction over a contiguous innermost axis (softmax / layer-norm
  stages, reduce ops): a thread team per row with warp shuffles
  (`cuda_rowreduce`);
- a fused row group (a Compute with stages: softmax, layer norm): one block per
  row, the stages in shared memory (`cuda_rows`);
- everything else (element-wise, pooling, depthwise, gather, short or strided
  reductions): one register tile of outputs per thread (`cuda_general`).

Every kernel is launched on a 1-D grid and walks its tiles grid-stride.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compiler.codegen.cuda.contraction import GemmGeometry, gemm_geometry, gemm_launch
from compiler.codegen.cuda.expr import PRELUDE
from compiler.codegen.cuda.gemm import render_gemm
from compiler.codegen.cuda.general import GeneralGeometry, general_geometry, render_general
from compiler.codegen.cuda.rowreduce import (
    RowGeometry,
    is_row_reduction,
    render_rowreduce,
    row_geometry,
    row_launch,
)
from compiler.codegen.cuda.rows import RowGroupGeometry, render_row_group, row_group_geometry
from compiler.ir.contraction import Contraction, match_contraction
from compiler.ir.te import Compute
from compiler.schedule.plan import ExecutionPlan, TileConfig

Dim3 = tuple[int, int, int]


_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@dataclass(frozen=True)
class KernelShape:
    """The kernel shape chosen for one Compute under one TileConfig."""

    kind: str  # "gemm" | "rowgroup" | "rowreduce" | "general"
    geometry: GemmGeometry | RowGroupGeometry | RowGeometry | GeneralGeometry
    contraction: Contraction | None = None


def kernel_shape(compute: Compute, tile: TileConfig) -> KernelShape:
    """Pick the kernel shape for `compute` and make `tile` legal for it."""
    _check_tile(compute, tile)
    if compute.stages:
        return KernelShape("rowgroup", row_group_geometry(compute))
    m = match_contraction(compute)
    if m is not None:
        return KernelShape("gemm", gemm_geometry(compute, m, tile), m)
    if is_row_reduction(compute):
        return KernelShape("rowreduce", row_geometry(compute, tile))
    return KernelShape("general", general_geometry(compute, tile))


def render_kernel(compute: Compute, tile: TileConfig, symbol: str) -> str:
    """CUDA C++ source defining `extern "C" __global__ void symbol(out, in0, ...)`.

    The source starts with the shared device helpers behind an include guard,
    so several kernels can be concatenated into one translation unit.
    """
    if not _SYMBOL.fullmatch(symbol):
        raise ValueError(f"kernel symbol {symbol!r} is not a C identifier")
    shape = kernel_shape(compute, tile)
    g = shape.geometry
    if isinstance(g, GemmGeometry):
        assert shape.contraction is not None
        body = render_gemm(compute, shape.contraction, g, symbol)
    elif isinstance(g, RowGroupGeometry):
        body = render_row_group(compute, g, symbol)
    elif isinstance(g, RowGeometry):
        body = render_rowreduce(compute, g, symbol)
    else:
        body = render_general(compute, g, symbol)
    return f"{PRELUDE}\n{body}"


def launch_dims(compute: Compute, tile: TileConfig) -> tuple[Dim3, Dim3]:
    """(grid, block) for the kernel `render_kernel(compute, tile, ...)` returns."""
    shape = kernel_shape(compute, tile)
    g = shape.geometry
    if isinstance(g, GemmGeometry):
        assert shape.contraction is not None
        return gemm_launch(compute, shape.contraction, g)
    if isinstance(g, RowGeometry):
        return row_launch(compute, g)
    if isinstance(g, RowGroupGeometry):
        return g.launch()
    return g.launch(compute)




def render_module(plan: ExecutionPlan) -> str:
    """One translation unit with every distinct kernel of `plan` (kernels sharing a
    symbol share a cache key, hence their source): what `model.cubin` is built from."""
    sources: dict[str, str] = {}
    for k in plan.kernels:
        if k.symbol not in sources:
            sources[k.symbol] = render_kernel(k.compute, k.tile, k.symbol)
    return "\n".join(sources.values())


def launch_table(plan: ExecutionPlan) -> list[list[dict]]:
    """Per wave, each kernel's launch: symbol, argument buffer ids, grid and block.

    Stored in a CUDA artifact's manifest under `MANIFEST_LAUNCHES`; the CUDA
    runtime needs nothing else about the kernels (it never sees the TE).
    """
    kernels = plan.kernel_map()
    table = []
    for wave in plan.waves:
        row = []
        for kid in wave:
            k = kernels[kid]
            grid, block = launch_dims(k.compute, k.tile)
            row.append({"kernel": k.id, "symbol": k.symbol, "args": list(k.args),
                        "grid": list(grid), "block": list(block)})
        table.append(row)
    return table


def _check_tile(c: Compute, tile: TileConfig) -> None:
    if len(tile.block) != len(c.axes) or len(tile.thread) != len(c.axes):
        raise ValueError(f"TileConfig has block {tile.block} / thread {tile.thread} for "
                         f"{len(c.axes)} spatial axes")
    if len(tile.reduce_step) != len(c.reduce_axes):
        raise ValueError(f"TileConfig has reduce_step {tile.reduce_step} for "
                         f"{len(c.reduce_axes)} reduce axes")
    if min((*tile.block, *tile.thread, *tile.reduce_step), default=1) < 1:
        raise ValueError(f"TileConfig sizes must be positive: {tile}")

