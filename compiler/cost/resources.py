"""What one tile of a kernel occupies on chip, and whether that fits the target.

CUDA: a block stages its input regions (block x reduce step) in shared memory,
rows padded against bank conflicts, and each thread keeps its register tile's
accumulators plus one reduce step of inputs in registers. CPU: a task's block
x reduce step must fit L2, the register tile x reduce step L1, and the register
tile's accumulators plus one step of inputs the vector registers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.aligned import pow2_at_least, pow2_at_most
from compiler.cost.analysis import TileAnalysis
from compiler.cost.banks import row_padding
from compiler.cost.grid import row_major_span
from compiler.cost.tiling import Tiling
from compiler.ir import te
from compiler.ir.dtypes import dtype
from compiler.target.base import Target

# Registers a CUDA thread needs besides its tile: indices, pointers, loop counters.
THREAD_OVERHEAD_REGISTERS = 16
# A CUDA reduction whose innermost reduce axis is contiguous in memory is reduced by a team
# of threads per output (warp shuffles), each taking about this many elements.
TEAM_ELEMS_PER_THREAD = 8
MAX_TEAM = 512  # Roller: at most 512 threads per block


@dataclass(frozen=True)
class TileResources:
    """On-chip usage of one tile. CUDA: `threads`, `smem_bytes` (padded, 0 when nothing is
    staged), `registers` per thread (32-bit). CPU: `registers` (vector registers),
    `block_bytes` (block x reduce step, for L2), `micro_bytes` (register tile x step, for L1)."""

    threads: int
    registers: int
    smem_bytes: int = 0
    block_bytes: int = 0
    micro_bytes: int = 0


def threads_per_block(tile: Tiling) -> int:
    """CUDA threads in one block: the block divided into register tiles (times the
    `reduction_team` per output where one applies)."""
    return math.prod(-(-b // t) for b, t in zip(tile.block, tile.thread, strict=True))


def warp_tile(tile: Tiling, lanes: int) -> tuple[int, ...]:
    """Outputs one CUDA warp covers: `lanes` consecutive threads of the block's thread grid,
    each with its register tile. Threads of a warp reading the same shared-memory word get
    it broadcast, so shared-memory traffic is counted per warp tile."""
    grid = [-(-b // t) for b, t in zip(tile.block, tile.thread, strict=True)]
    return tuple(t * n for t, n in zip(tile.thread, row_major_span(grid, lanes), strict=True))


def reuses_across_outputs(an: TileAnalysis) -> bool:
    """Whether some input element is read by several outputs (a contraction, a convolution,
    pooling windows), rather than each output reading its own elements (a row reduction)."""
    outputs = math.prod(an.extents)
    own = an.input_elems((1,) * len(an.extents))
    unique = an.input_elems(an.extents)
    return any(outputs * o > 2 * u for o, u in zip(own, unique, strict=True) if u)


def reduction_team(an: TileAnalysis, warp: int) -> int:
    """Threads cooperating on one output on CUDA: a power-of-two number of warps for a long
    reduction without reuse across outputs whose last reduce axis indexes some load's
    innermost dim without a spatial axis (softmax / layer-norm rows, sums over trailing
    axes); 1 otherwise."""
    length = math.prod(an.reduce_extents) if an.reduce_extents else 0
    if length < warp or reuses_across_outputs(an):
        return 1
    last = an.compute.reduce_axes[-1].name
    spatial = {a.name for a in an.compute.axes}
    for ld in (x for x in te.walk(an.compute.body) if isinstance(x, te.Load) and x.indices):
        names = {v.name for v in te.walk(ld.indices[-1]) if isinstance(v, te.Var)}
        if last in names and not names & spatial:
            wanted = -(-length // TEAM_ELEMS_PER_THREAD)
            return min(MAX_TEAM, max(warp, pow2_at_least(wanted)))
    return 1


def stages_inputs(an: TileAnalysis) -> bool:
    """Whether a kernel stages inputs on chip: only reductions reuse an input across outputs."""
    return bool(an.reduce_extents)


def unit_step(an: TileAnalysis) -> tuple[int, ...]:
    """A reduce step of one element on every reduce axis (one register-level step)."""
    return (1,) * len(an.reduce_extents)


# The CUDA GEMM kernel's K per shared-memory stage, at most (compiler/schedule/cuda_tile.py).
MAX_GEMM_K_STEP = 32


def gemm_k_step(reduce_step: Sequence[int], k: int) -> int:
    """K per shared-memory stage of the CUDA GEMM kernel for an rTile's `reduce_step` over a
    reduction of `k`: the step's elements rounded down to a power of two, within 4 and
    MAX_GEMM_K_STEP and no more than `k` needs (before shared memory may halve it). A
    convolution's (8, 3, 3) step is 72 elements, staged 32 at a time."""
    return max(4, min(MAX_GEMM_K_STEP, pow2_at_most(math.prod(reduce_step)), pow2_at_least(k)))


def cuda_stages_inputs(an: TileAnalysis, target: Target) -> bool:
    """Whether a CUDA kernel stages inputs in shared memory step by step: reductions do,
    except contiguous row reductions, whose thread teams read global memory directly."""
    return stages_inputs(an) and reduction_team(an, target.lanes) == 1


def smem_bytes(an: TileAnalysis, tile: Tiling, target: Target, padded: bool = True) -> int:
    """Shared memory of one block's staged inputs (block x reduce step), rows padded."""
    if not cuda_stages_inputs(an, target):
        return 0
    total = 0
    regions = an.region_extents(tile.block, tile.reduce_step)
    for ext, elems, nb in zip(regions, an.input_elems(tile.block, tile.reduce_step), an.in_bytes,
                              strict=True):
        if ext and padded and elems == math.prod(ext):
            elems = math.prod(ext[:-1]) * (ext[-1] + row_padding(ext[-1], nb, target.banks))
        total += elems * nb
    return total


def cuda_resources(an: TileAnalysis, tile: Tiling, target: Target,
                   padded: bool = True) -> TileResources:
    """Threads, padded shared memory and registers per thread of a CUDA tiling."""
    acc = dtype(an.compute.acc_dtype).nbytes
    outputs = math.prod(tile.thread)
    words = -(-outputs * acc // 4) + -(-an.input_bytes(tile.thread, unit_step(an)) // 4)
    return TileResources(threads=threads_per_block(tile) * reduction_team(an, target.lanes),
                         registers=words + THREAD_OVERHEAD_REGISTERS,
                         smem_bytes=smem_bytes(an, tile, target, padded))


def simd_lanes(target: Target, elem_bytes: int) -> int:
    """Elements of `elem_bytes` in one CPU vector register (`Target.lanes` counts fp32)."""
    return max(1, target.lanes * 4 // elem_bytes)


def cpu_vector_registers(an: TileAnalysis, thread: tuple[int, ...], target: Target) -> int:
    """Vector registers of a CPU register tile: accumulators plus one step of inputs (the
    epilogue's own inputs are read after the reduction, into registers the steps freed)."""
    per_vector = simd_lanes(target, dtype(an.compute.acc_dtype).nbytes)
    acc = math.prod(thread[:-1]) * -(-thread[-1] // per_vector) if thread else 1
    inputs = 0
    for i, (n, nb) in enumerate(zip(an.input_elems(thread, unit_step(an)), an.in_bytes, strict=True)):
        if i in an.post_only:
            continue
        words = -(-n * nb // 4)
        inputs += -(-words // target.lanes)  # `lanes` 4-byte words per vector
    return acc + inputs


def cpu_resources(an: TileAnalysis, tile: Tiling, target: Target) -> TileResources:
    """Vector registers, L2 block bytes and L1 register-tile bytes of a CPU tiling."""
    return TileResources(threads=1,
                         registers=cpu_vector_registers(an, tile.thread, target),
                         block_bytes=an.footprint(tile.block, tile.reduce_step),
                         micro_bytes=an.footprint(tile.thread, tile.reduce_step))


def resources(an: TileAnalysis, tile: Tiling, target: Target) -> TileResources:
    """The on-chip usage of `tile` on `target`."""
    return cuda_resources(an, tile, target) if target.kind == "cuda" else cpu_resources(an, tile, target)


def violations(res: TileResources, target: Target) -> tuple[str, ...]:
    """Every limit of `target` the tile breaks, in words (empty when it fits)."""
    out = []
    if target.kind == "cuda":
        x = target.extras
        limits = [
            ("threads per block", res.threads, int(x.get("max_threads_per_block", 1024))),
            ("shared memory per block", res.smem_bytes,
             int(x.get("smem_per_block", target.level("smem").capacity))),
            ("registers per thread", res.registers, int(x.get("max_registers_per_thread", 255))),
            ("registers per block", res.registers * res.threads, target.registers),
        ]
    else:
        limits = [
            ("vector registers", res.registers, target.registers),
            ("L1 bytes (register tile x reduce step)", res.micro_bytes, target.level("l1").capacity),
            ("L2 bytes (block x reduce step)", res.block_bytes, target.level("l2").capacity),
        ]
    for what, used, limit in limits:
        if used > limit:
            out.append(f"{what}: {used} > {limit}")
    return tuple(out)
