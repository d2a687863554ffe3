"""CUDA kernel shapes and launch shapes, decided when the plan is built (the CUDA
backend's tile step) and recorded in the kernel's `TileConfig.launch` (a `CudaLaunch`,
compiler/schedule/cuda_launch.py); compiler/codegen/cuda/ renders them and the launch
table in the manifest is their grid and block.

Which kernel shape a Compute gets, from the Compute and its rTile alone:

- contraction (`sum(x * y)` with both operands owning spatial axes: matmul,
  batched matmul, implicit-GEMM convolution, compiler/ir/contraction.py): a
  shared-memory tiled GEMM; the rows side is staged along the slow thread index,
  the cols side along the fast one;
- long reduction over a contiguous innermost axis (softmax / layer-norm stages,
  reduce ops): a thread team per row with warp shuffles;
- a fused attention group (compiler/ir/attention.py): one block per batch index and
  block of query rows, key and value blocks staged through shared memory, the softmax
  online in registers (its blocks are the rTile's `TileConfig.attention`);
- a fused row group (a Compute with stages: softmax, layer norm): one block per
  row, the stages in shared memory;
- everything else (element-wise, pooling, depthwise, gather, short or strided
  reductions): one register tile of outputs per thread.

The rTile's sizes are made legal for the shape (powers of two, thread and register
limits, shared memory), and every kernel is launched on a 1-D grid that it walks
grid-stride.
"""

from __future__ import annotations

import dataclasses
import math

from compiler.aligned import pow2_at_least, pow2_at_most
from compiler.cost.resources import gemm_k_step
from compiler.ir.attention import match_attention
from compiler.ir.contraction import Contraction, match_contraction, side_extent
from compiler.ir.dtypes import dtype
from compiler.ir.recompute import recomputable, recompute
from compiler.ir.rows import RowSharing, group_sharing, row_elems, stage_row_bytes
from compiler.ir.te import Compute, Load, Var, count_ops, walk
from compiler.schedule.cuda_launch import (
    MAX_GRID,
    MAX_THREADS,
    WARP,
    AttentionGeometry,
    CudaLaunch,
    Dim3,
    GemmGeometry,
    GeneralGeometry,
    RowGeometry,
    RowGroupGeometry,
    ceil_div,
    prefetches,
)
from compiler.schedule.plan import TileConfig

_GEMM_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
SMEM_LIMIT = 48 * 1024  # static shared memory per block without opting in
MAX_TILE = 256
GEMM_MIN_THREADS = 128  # per GEMM block, when the register tile can shrink to reach it
MAX_REGS = 16  # outputs per thread of the general kernel: accumulators and loads stay in registers
GENERAL_MIN_THREADS = 64  # below this a block leaves most of an SM's lanes idle
MIN_REDUCE = WARP  # shorter rows leave most of a warp idle: the general kernel does better
ELEMS_PER_THREAD = 8  # enough loads in flight per thread before adding threads
# A row of a group's stages lives in static shared memory (48 KB per block without
# opting in), beside the reduction's exchange slots: groups are formed only where it fits.
ROW_STAGE_BYTES = 40 << 10
# Operations a member's body may grow to with the stages it reads recomputed in it: a
# softmax's sum and scaling each take its exponential (a few), chains of element-wise
# stages each read several times would multiply.
MAX_RECOMPUTED_OPS = 64
# Threads sharing one query row of an attention block: half a warp, so a row's max and sum
# take four shuffles and a block of 16-key steps keeps every lane busy.
ATTENTION_TEAM = 16


def plan_cuda_tile(compute: Compute, tile: TileConfig) -> TileConfig:
    """`tile` (an rTile) with its CUDA kernel shape and launch decided (`tile.launch`)."""
    return dataclasses.replace(tile, launch=cuda_launch(compute, tile))


def cuda_launch(compute: Compute, tile: TileConfig) -> CudaLaunch:
    """Pick the kernel shape for `compute`, make `tile` legal for it, and launch it."""
    _check_tile(compute, tile)
    if tile.attention:
        a = match_attention(compute)
        if a is None:
            raise ValueError(f"attention blocks were planned for {compute.label}, which is not attention")
        ag = attention_geometry(*tile.attention)
        tasks = math.prod(a.batch) * ceil_div(a.queries, ag.bq)
        return CudaLaunch("attention", ag, _grid(tasks), (ag.threads, 1, 1))
    if compute.stages:
        rg = row_group_geometry(compute)
        return CudaLaunch("rowgroup", rg, _grid(rg.rows), (rg.threads, 1, 1))
    m = match_contraction(compute)
    if m is not None:
        g = gemm_geometry(compute, m, tile)
        return CudaLaunch("gemm", g, _grid(_gemm_tiles(compute, m, g)), (g.threads, 1, 1))
    if is_row_reduction(compute):
        r = row_geometry(compute, tile)
        rows_out = max(1, math.prod(a.extent for a in compute.axes))
        return CudaLaunch("rowreduce", r, _grid(ceil_div(rows_out, r.rows)), (r.threads, 1, 1))
    e = general_geometry(compute, tile)
    return CudaLaunch("general", e, _grid(math.prod(e.tiles(compute))), (math.prod(e.threads), 1, 1))


def _grid(units: int) -> Dim3:
    """A 1-D grid of `units` blocks, at least one and at most MAX_GRID (grid-stride beyond)."""
    return max(1, min(units, MAX_GRID)), 1, 1


def _gemm_tiles(c: Compute, m: Contraction, g: GemmGeometry) -> int:
    return (side_extent(c, m.batch) * ceil_div(side_extent(c, m.rows), g.bm)
            * ceil_div(side_extent(c, m.cols), g.bn))


def gemm_geometry(c: Compute, m: Contraction, tile: TileConfig) -> GemmGeometry:
    """The TileConfig's tiles on the GEMM's sides, made legal: powers of two, register
    tile at most 8 x 8 (smaller when that is what it takes to reach 128 threads),
    32..1024 threads where the sizes allow, shared memory under 48 KB; each operand
    prefetched through registers where its slice is small enough per thread (`prefetches`)."""
    big_m, big_n = side_extent(c, m.rows), side_extent(c, m.cols)
    big_k = math.prod(a.extent for a in c.reduce_axes)
    elem = _GEMM_BYTES[c.acc_dtype]
    tm = pow2_at_most(min(8, math.prod(tile.thread[d] for d in m.rows)))
    tn = pow2_at_most(min(8, math.prod(tile.thread[d] for d in m.cols)))
    tm, tn = min(tm, pow2_at_least(big_m)), min(tn, pow2_at_least(big_n))
    bm = max(tm, min(pow2_at_most(math.prod(tile.block[d] for d in m.rows)), MAX_TILE,
                     pow2_at_least(big_m)))
    bn = max(tn, min(pow2_at_most(math.prod(tile.block[d] for d in m.cols)), MAX_TILE,
                     pow2_at_least(big_n)))
    bk = gemm_k_step(tile.reduce_step, big_k)
    # Too few threads hide no latency: give up register tile before block tile.
    while (bm // tm) * (bn // tn) < GEMM_MIN_THREADS and max(tm, tn) > 2:
        if tm >= tn:
            tm //= 2
        else:
            tn //= 2
    while (bm // tm) * (bn // tn) > MAX_THREADS:
        if bm // tm >= bn // tn:
            bm //= 2
        else:
            bn //= 2
    while (bm // tm) * (bn // tn) < 32 and (bm < big_m or bn < big_n):
        if bn < big_n:
            bn *= 2
        else:
            bm *= 2
    while bk * (bm + bn + 2) * elem > SMEM_LIMIT and bk > 4:
        bk //= 2
    while bk * (bm + bn + 2) * elem > SMEM_LIMIT:
        bm, bn = max(tm, bm // 2), max(tn, bn // 2)
    threads = (bm // tm) * (bn // tn)
    return GemmGeometry(bm, bn, bk, tm, tn, prefetches(bk, bm, threads), prefetches(bk, bn, threads))


def general_geometry(c: Compute, tile: TileConfig) -> GeneralGeometry:
    """The TileConfig's block and register tile, made legal for CUDA.

    Register tiles are clipped to the extent and to `MAX_REGS`; threads per
    block to [GENERAL_MIN_THREADS, 1024] where the work allows (outer axes give up
    threads first, inner axes gain them first).
    """
    ext = [max(1, a.extent) for a in c.axes]
    regs = [max(1, min(t, e)) for t, e in zip(tile.thread, ext, strict=True)]
    for d in range(len(regs)):
        while math.prod(regs) > MAX_REGS and regs[d] > 1:
            regs[d] = ceil_div(regs[d], 2)
    threads = [max(1, ceil_div(min(max(b, r), e), r))
               for b, r, e in zip(tile.block, regs, ext, strict=True)]
    d = 0
    while math.prod(threads) > MAX_THREADS:
        if threads[d] > 1:
            threads[d] = ceil_div(threads[d], 2)
        else:
            d += 1
    for d in reversed(range(len(threads))):
        while math.prod(threads) < GENERAL_MIN_THREADS and threads[d] * regs[d] < ext[d]:
            threads[d] *= 2
    return GeneralGeometry(tuple(threads), tuple(regs))


def is_row_reduction(c: Compute) -> bool:
    """A long reduction whose last reduce axis indexes some load's innermost dimension."""
    if not c.is_reduction or math.prod(a.extent for a in c.reduce_axes) < MIN_REDUCE:
        return False
    last = c.reduce_axes[-1].name
    spatial = {a.name for a in c.axes}
    for ld in (x for x in walk(c.body) if isinstance(x, Load)):
        if ld.indices:
            inner = {v.name for v in walk(ld.indices[-1]) if isinstance(v, Var)}
            if last in inner and not inner & spatial:
                return True
    return False


def row_geometry(c: Compute, tile: TileConfig) -> RowGeometry:
    """Threads per row from the reduce length; rows per block from the TileConfig's block,
    kept between 128 and 1024 threads per block."""
    length = math.prod(a.extent for a in c.reduce_axes)
    per_row = min(MAX_THREADS, max(WARP, pow2_at_least(ceil_div(length, ELEMS_PER_THREAD))))
    rows_out = max(1, math.prod(a.extent for a in c.axes))
    wanted = pow2_at_most(max(1, math.prod(tile.block)))
    rows = max(max(1, 128 // per_row), min(wanted, MAX_THREADS // per_row))
    rows = min(rows, pow2_at_least(rows_out))
    return RowGeometry(per_row, rows)


def attention_geometry(bq: int, bk: int, rows: int) -> AttentionGeometry:
    """An attention rTile's query rows `bq`, keys `bk` and query rows per thread `rows`,
    made legal: powers of two, whole warps (two team rows at least), keys a whole number
    of team widths, at most 1024 threads."""
    bq = max(2, pow2_at_least(bq))
    rows = max(1, min(pow2_at_most(rows), bq // 2))
    while bq // rows * ATTENTION_TEAM > MAX_THREADS:
        rows *= 2
    return AttentionGeometry(bq, ATTENTION_TEAM * max(1, ceil_div(bk, ATTENTION_TEAM)), ATTENTION_TEAM, rows)


def row_group_geometry(c: Compute) -> RowGroupGeometry:
    """Enough threads for the longest member row the kernel runs at `ELEMS_PER_THREAD`
    elements each (a warp at least, a power of two up to 1024); the stages it recomputes."""
    g = group_sharing(c).rows
    recomputed = recomputed_stages(c)
    run = [m for k, m in enumerate(c.members()) if k not in recomputed]
    work = max(max(row_elems(m, g), math.prod(a.extent for a in m.reduce_axes)) for m in run)
    threads = min(MAX_THREADS, max(WARP, pow2_at_least(ceil_div(work, ELEMS_PER_THREAD))))
    return RowGroupGeometry(threads, max(1, math.prod(c.shape[:g])), recomputed)


def recomputed_stages(c: Compute) -> tuple[int, ...]:
    """The stages of row group `c` its kernel recomputes where they are read: none where a
    row of every stage fits shared memory, else every element-wise one."""
    return () if stage_row_bytes(c, group_sharing(c)) <= ROW_STAGE_BYTES else recomputable(c)


def row_group_fits(c: Compute, sharing: RowSharing) -> bool:
    """The CUDA backend's rule for a row group (tilegraph/rows.py `RowFit`): a row of the
    stages it keeps fits shared memory, and no member grows past `MAX_RECOMPUTED_OPS`
    by recomputing the others."""
    recomputed = recomputed_stages(c)
    kept = sum(row_elems(s, sharing.rows) * dtype(s.dtype).nbytes
               for k, s in enumerate(c.stages) if k not in recomputed)
    members = recompute(c, recomputed).members() if recomputed else ()
    return kept <= ROW_STAGE_BYTES and all(count_ops(m.body) <= MAX_RECOMPUTED_OPS for m in members)


def _check_tile(c: Compute, tile: TileConfig) -> None:
    if len(tile.block) != len(c.axes) or len(tile.thread) != len(c.axes):
        raise ValueError(f"TileConfig has block {tile.block} / thread {tile.thread} for "
                         f"{len(c.axes)} spatial axes")
    if len(tile.reduce_step) != len(c.reduce_axes):
        raise ValueError(f"TileConfig has reduce_step {tile.reduce_step} for "
                         f"{len(c.reduce_axes)} reduce axes")
    if min((*tile.block, *tile.thread, *tile.reduce_step), default=1) < 1:
        raise ValueError(f"TileConfig sizes must be positive: {tile}")

