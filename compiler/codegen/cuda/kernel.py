"""CUDA C++ code generation: one `extern "C" __global__` kernel per Compute.

The kernel ABI is the plan's (compiler/schedule/plan.py): the output pointer
first, then one pointer per Compute input, all dense row-major. Which kernel
shape a Compute gets, its geometry and its launch are the plan's too
(`TileConfig.launch`, decided in compiler/schedule/cuda_tile.py), so the source
and the launch table always agree; this module renders them:

- "gemm": shared-memory tiled GEMM (`cuda_gemm`, `cuda_gemm_stage`);
- "rowreduce": a thread team per row with warp shuffles (`cuda_rowreduce`);
- "rowgroup": one block per row, the stages in shared memory (`cuda_rows`);
- "attention": flash attention, one block per block of query rows, key and value blocks
  staged through shared memory (attention.py);
- "general": one register tile of outputs per thread (`cuda_general`).

Every kernel is launched on a 1-D grid and walks its tiles grid-stride.
"""

from __future__ import annotations

import re

from compiler.codegen.cuda.attention import render_attention
from compiler.codegen.cuda.expr import PRELUDE
from compiler.codegen.cuda.gemm import render_gemm
from compiler.codegen.cuda.general import render_general
from compiler.codegen.cuda.rowreduce import render_rowreduce
from compiler.codegen.cuda.rows import render_row_group
from compiler.ir.attention import match_attention
from compiler.ir.contraction import match_contraction
from compiler.ir.te import Compute
from compiler.schedule.cuda_launch import (
    AttentionGeometry,
    CudaLaunch,
    GemmGeometry,
    GeneralGeometry,
    RowGeometry,
    RowGroupGeometry,
)
from compiler.schedule.plan import ExecutionPlan, TileConfig

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def render_kernel(compute: Compute, tile: TileConfig, symbol: str) -> str:
    """CUDA C++ source defining `extern "C" __global__ void symbol(out, in0, ...)`, the
    kernel shape and geometry `tile.launch` plans.

    The source starts with the shared device helpers behind an include guard,
    so several kernels can be concatenated into one translation unit.
    """
    if not _SYMBOL.fullmatch(symbol):
        raise ValueError(f"kernel symbol {symbol!r} is not a C identifier")
    g = planned_launch(tile).geometry
    if isinstance(g, GemmGeometry):
        m = match_contraction(compute)
        if m is None:
            raise ValueError(f"a GEMM launch was planned for {compute.label}, which is not a contraction")
        body = render_gemm(compute, m, g, symbol)
    elif isinstance(g, AttentionGeometry):
        parts = match_attention(compute)
        if parts is None:
            raise ValueError(f"an attention launch was planned for {compute.label}, which is not attention")
        body = render_attention(compute, parts, g, symbol)
    elif isinstance(g, RowGroupGeometry):
        body = render_row_group(compute, g, symbol)
    elif isinstance(g, RowGeometry):
        body = render_rowreduce(compute, g, symbol)
    else:
        assert isinstance(g, GeneralGeometry)
        body = render_general(compute, g, symbol)
    return f"{PRELUDE}\n{body}"


def planned_launch(tile: TileConfig) -> CudaLaunch:
    """The CUDA launch the plan recorded in `tile`; a tile without one was never planned
    for CUDA (compiler/schedule/cuda_tile.py `plan_cuda_tile`)."""
    if tile.launch is None:
        raise ValueError(f"tile {tile} plans no CUDA launch")
    return tile.launch


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
            launch = planned_launch(k.tile)
            row.append({"kernel": k.id, "symbol": k.symbol, "args": list(k.args),
                        "grid": list(launch.grid), "block": list(launch.block)})
        table.append(row)
    return table
