"""Roller's micro-performance model: every memory level is a pipeline stage.

A stage's time is the bytes moved out of that level for the whole kernel
divided by its bandwidth; compute is FLOPs over peak x utilisation; the
kernel takes as long as its slowest stage. Bytes come only from the TE
analyses (via `TileAnalysis`). Utilisation counts wave quantisation (the last
wave of tiles leaves units idle), lanes left empty (a partial warp, a register
tile narrower than the SIMD width) and too little independent work per unit to
hide arithmetic latency.

Stages per kind:
- CUDA: dram (block tiles, after L2 hits), l2 (every block tile's loads),
  smem (warps' register tiles read from shared memory, times bank conflicts;
  absent for kernels that stage nothing: element-wise ones, and contiguous row
  reductions run by a thread team per output), compute (plus exposed latency of
  each reduce step and block start).
- CPU: dram (after last-level-cache hits), l3 (block tiles), l2 (register
  tiles), l1 (vector loads into registers per reduce element), compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.cost.analysis import TileAnalysis
from compiler.cost.banks import conflict_ways
from compiler.cost.grid import row_major_span
from compiler.cost.resources import (
    cpu_resources,
    cuda_resources,
    cuda_stages_inputs,
    gemm_k_step,
    simd_lanes,
    stages_inputs,
    unit_step,
    violations,
    warp_tile,
)
from compiler.cost.tiling import Tiling
from compiler.ir.contraction import match_contraction
from compiler.ir.dtypes import dtype
from compiler.ir.rows import RowSharing, row_bytes
from compiler.ir.te import Call, Compute, loads_of, walk
from compiler.target.base import MemoryLevel, Target

# Independent FMA streams a unit needs in flight to keep its pipes busy:
# 4 CUDA sub-partitions x ~4 cycles latency; 2 CPU FMA pipes x 4 cycles.
CUDA_LATENCY_STREAMS = 16
CPU_LATENCY_STREAMS = 8
# A shared level (DRAM, L2, L3) saturates once this fraction of the units pulls from it.
SATURATING_UNITS = 0.5
# Cycles a CUDA block waits per reduce step (two barriers and a global load round trip),
# hidden only by the other blocks resident on its SM: why Roller grows reduce steps.
STEP_LATENCY_CYCLES = 800
# Fixed cost of starting a tile: CUDA block scheduling and prologue; a CPU task's
# dispatch, bounds and accumulator set-up. Small, but it stops tiles from shrinking
# to nothing when memory-bound tiles all tie.
BLOCK_OVERHEAD_CYCLES = 500
TASK_OVERHEAD_CYCLES = 200
# A transcendental costs more than the one FLOP it counts as: the CPU kernels' inlined
# vector form (compiler/codegen/c/vector_math.py, a dozen FMA-pipe instructions) about
# this many cycles a vector, libm's scalar call about this many a value. Kernels run an
# epilogue (or an element-wise body) on vectors only along an innermost row of outputs
# at least a vector long: where the tile's is shorter, every output calls libm (a fused
# GELU's erff per output once cost twice the row-dot GEMM it followed, unseen by the model).
VECTOR_MATH_CYCLES = 8.0
SCALAR_MATH_CYCLES = 30.0
_MATH = frozenset({"exp", "log", "tanh", "erf", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                   "asinh", "acosh", "atanh", "pow"})


@dataclass(frozen=True)
class Estimate:
    """Predicted time of one tiling: `stages` in microseconds per pipeline stage
    (level names and "compute"), `bound` the slowest, `waves` of concurrently
    resident tiles, `violations` the target limits the tile breaks (empty = fits),
    `dram_bytes` what the kernel is predicted to move across DRAM (after the outermost
    cache's hits)."""

    time_us: float
    stages: dict[str, float]
    bound: str
    tiles: int
    waves: int
    violations: tuple[str, ...] = field(default=())
    dram_bytes: int = 0

    @property
    def fits(self) -> bool:
        return not self.violations


def estimate(compute: Compute, tile: Tiling, target: Target,
             analysis: TileAnalysis | None = None, padded_smem: bool = True) -> Estimate:
    """Predict the time of `compute` tiled as `tile` on `target`.

    Pass the `analysis` of `compute` to share memoised TE analyses across many
    estimates; `padded_smem=False` models shared-memory rows without the
    bank-conflict padding.
    """
    an = analysis or TileAnalysis(compute)
    if 0 in an.extents:
        return Estimate(0.0, {"compute": 0.0}, "compute", 0, 0)
    if target.kind == "cuda":
        return _cuda(an, tile, target, padded_smem)
    return _cpu(an, tile, target)


def estimate_row_group(c: Compute, sharing: RowSharing, block_rows: int, target: Target) -> Estimate:
    """Predict a fused row group (a Compute with stages, Welder's cache level) run in tasks
    of `block_rows` rows: its inputs and output cross DRAM once; every member reads and
    writes its own tensors in the cache level a block's working set fits (L1, else L2);
    compute is every member's FLOPs, plus the tasks' start-up."""
    g, units = sharing.rows, target.units
    tasks = math.prod(c.shape[:g - 1]) * -(-c.shape[g - 1] // block_rows)
    util = wave_utilisation(tasks, units)
    dram = target.levels[0]
    moved = group_bytes(c)
    stages = {"dram": moved / (dram.bandwidth * _shared_level_efficiency(tasks, units))}
    inner = 0
    for m in c.members():
        read = {ld.input for ld in loads_of(m)}
        inner += sum(m.inputs[p].nbytes for p in read) + m.nbytes
    level = _row_level(target, block_rows * row_bytes(c, sharing))
    stages[level.name] = inner / (level.bandwidth * util)
    waves = -(-tasks // units)
    stages["compute"] = c.flops() / (_peak(target, c) * util) + waves * TASK_OVERHEAD_CYCLES / clock_hz(target)
    return finish(stages, tasks, waves, (), moved)


def group_bytes(c: Compute) -> int:
    """DRAM bytes of a fused row group: its inputs read once and its output written once (its
    stages meet in cache, never in DRAM)."""
    return sum(t.nbytes for t in (*c.inputs, c))


def _row_level(target: Target, working_set: int) -> MemoryLevel:
    """Where a row group's members meet: shared memory on a GPU (its stages live there),
    on a CPU L1 when a block's working set fits, else L2."""
    names = {lv.name for lv in target.levels}
    if "smem" in names:
        return target.level("smem")
    l1 = target.level("l1")
    return l1 if working_set <= l1.capacity else target.level("l2")


def finish(stages_s: dict[str, float], tiles: int, waves: int,
            broken: tuple[str, ...], dram_bytes: float) -> Estimate:
    """The Estimate of a kernel from its stages' seconds (the slowest stage bounds it),
    its tiles and waves, the alignment rules it breaks and its DRAM bytes."""
    stages = {k: v * 1e6 for k, v in stages_s.items()}
    bound = max(stages, key=lambda k: stages[k])
    return Estimate(stages[bound], stages, bound, tiles, waves, broken, round(dram_bytes))


def _padded_flops(an: TileAnalysis, tile: Tiling) -> float:
    """FLOPs including the padding of the last, partial block on every axis."""
    ratio = math.prod(-(-e // b) * b / e for e, b in zip(an.extents, tile.block, strict=True))
    return an.flops() * ratio


def _peak(target: Target, compute: Compute) -> float:
    return target.peak_flops.get(compute.acc_dtype, target.peak_flops["float32"])


def wave_utilisation(tiles: int, units: int) -> float:
    """Fraction of unit-time doing work when `tiles` run in waves of `units`."""
    return tiles / (-(-tiles // units) * units)


def _shared_level_efficiency(tiles: int, units: int) -> float:
    """Fraction of a shared level's bandwidth that min(tiles, units) active units draw."""
    return min(1.0, min(tiles, units) / (SATURATING_UNITS * units))


def wave_tile(an: TileAnalysis, block: tuple[int, ...], concurrent: int) -> tuple[int, ...]:
    """The outputs `concurrent` tiles launched together cover, as one bigger tile."""
    grid = [-(-e // b) for e, b in zip(an.extents, block, strict=True)]
    return tuple(b * n for b, n in zip(block, row_major_span(grid, concurrent), strict=True))


def _dram_bytes(an: TileAnalysis, tile: Tiling, target: Target, tiles: int,
                concurrent: int) -> float:
    """Bytes that miss the outermost cache.

    Tiles resident together walk the reduction roughly in step, so what one
    wave of them reads is fetched from DRAM once when one reduce step of the
    whole wave fits the cache (L2 on CUDA, L3 on CPU); the more it overflows,
    the closer DRAM traffic gets to every tile's own traffic.
    """
    dram = target.levels[0]
    per_tiles = an.traffic(tile.block, dram.transaction).total
    wave = wave_tile(an, tile.block, concurrent)
    per_waves = an.traffic(wave, dram.transaction).per_tile * -(-tiles // max(1, concurrent))
    shared = [lv for lv in target.levels[1:] if lv.shared]
    cache = shared[0].capacity if shared else 0
    miss = max(0.0, 1.0 - cache / max(1, an.footprint(wave, tile.reduce_step)))
    moved = min(per_waves, per_tiles) + max(0, per_tiles - per_waves) * miss
    return max(an.compulsory(dram.transaction), moved)


def _cuda(an: TileAnalysis, tile: Tiling, target: Target, padded: bool) -> Estimate:
    res = cuda_resources(an, tile, target, padded)
    broken = violations(res, target)
    units, x = target.units, target.extras
    tiles = an.tiles(tile.block)
    limits = [int(x.get("max_blocks_per_sm", 32)),
              int(x.get("max_threads_per_sm", 2048)) // max(1, res.threads),
              target.registers // max(1, res.registers * _round_up(res.threads, target.lanes))]
    if res.smem_bytes:
        limits.append(target.level("smem").capacity // res.smem_bytes)
    blocks_per_sm = max(1, min(limits))
    waves = -(-tiles // (units * blocks_per_sm))
    sm_util = wave_utilisation(tiles, units)
    staged = cuda_stages_inputs(an, target)

    concurrent = min(tiles, units * blocks_per_sm)
    moved = _dram_bytes(an, tile, target, tiles, concurrent)
    stages = {"dram": moved / (target.levels[0].bandwidth * _shared_level_efficiency(tiles, units))}
    if "l2" in {lv.name for lv in target.levels}:
        l2 = target.level("l2")
        stages["l2"] = an.traffic(tile.block, l2.transaction).total / (
            l2.bandwidth * _shared_level_efficiency(tiles, units))
    if staged:
        smem = target.level("smem")
        warp = warp_tile(tile, target.lanes)
        reads = an.input_bytes(warp) * an.tiles(warp)
        stages["smem"] = reads * _bank_penalty(an, tile, target, padded) / (smem.bandwidth * sm_util)

    per_sm = -(-tiles // units)  # blocks each SM runs, one after another or side by side
    resident = min(blocks_per_sm, per_sm)
    threads = res.threads
    resident_warps = resident * -(-threads // target.lanes)
    ilp = math.prod(tile.thread) if staged else CUDA_LATENCY_STREAMS
    latency_eff = min(1.0, resident_warps * ilp / CUDA_LATENCY_STREAMS)
    lane_eff = threads / _round_up(threads, target.lanes)
    steps = _cuda_reduce_steps(an, tile) if staged else 1
    step_cycles = steps * STEP_LATENCY_CYCLES if steps > 1 else 0
    exposed = per_sm / resident * (step_cycles + BLOCK_OVERHEAD_CYCLES) / clock_hz(target)
    stages["compute"] = _padded_flops(an, tile) / (
        _peak(target, an.compute) * sm_util * latency_eff * lane_eff) + exposed
    return finish(stages, tiles, waves, broken, moved)


def clock_hz(target: Target) -> float:
    """The clock the model assumes for `target` (its `clock_ghz` extra, else 1.5 GHz)."""
    return float(target.extras.get("clock_ghz", 1.5)) * 1e9


def _reduce_steps(an: TileAnalysis, tile: Tiling) -> int:
    """Reduce steps one tile takes (the staging loop's trip count)."""
    return math.prod(-(-e // max(1, s)) for e, s in zip(an.reduce_extents, tile.reduce_step,
                                                          strict=True))


def _cuda_reduce_steps(an: TileAnalysis, tile: Tiling) -> int:
    """Shared-memory stages one CUDA tile takes: a contraction's GEMM kernel stages its
    flattened K `gemm_k_step` at a time, whatever the rTile's reduce step (ResNet-18's
    512-channel 3x3 convolution, reduce step (8, 3, 3): 144 stages of 32, not 64 of 72:
    predicted 42 us, 212 us on an H200); other staged kernels follow the reduce step."""
    if match_contraction(an.compute) is None:
        return _reduce_steps(an, tile)
    k = math.prod(an.reduce_extents)
    return -(-k // gemm_k_step(tile.reduce_step, k))


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _bank_penalty(an: TileAnalysis, tile: Tiling, target: Target, padded: bool) -> float:
    """Serialisation of shared-memory reads: 1 when rows are padded, else the worst input's."""
    if padded:
        return 1.0
    ways = [conflict_ways(ext[-1], dtype(t.dtype).nbytes, target.banks)
            for t, ext in zip(an.compute.inputs, an.region_extents(tile.block, tile.reduce_step),
                              strict=True) if ext and math.prod(ext)]
    return float(max(ways, default=1))


def _cpu(an: TileAnalysis, tile: Tiling, target: Target) -> Estimate:
    res = cpu_resources(an, tile, target)
    broken = violations(res, target)
    units, lanes = target.units, simd_lanes(target, dtype(an.compute.acc_dtype).nbytes)
    tiles = an.tiles(tile.block)
    core_util = wave_utilisation(tiles, units)
    names = [lv.name for lv in target.levels]

    moved = _dram_bytes(an, tile, target, tiles, min(tiles, units))
    stages = {"dram": moved / (target.levels[0].bandwidth * _shared_level_efficiency(tiles, units))}
    if "l3" in names:
        l3 = target.level("l3")
        stages["l3"] = an.traffic(tile.block, l3.transaction).total / (l3.bandwidth * core_util)
    l2, l1 = target.level("l2"), target.level("l1")
    micro_tiles = an.tiles(tile.thread)
    stages["l2"] = an.traffic(tile.thread, l2.transaction).per_tile * micro_tiles / (
        l2.bandwidth * core_util)
    # Per reduce element the register tile loads one step of inputs, each load a whole
    # vector slot (a broadcast scalar costs as much as a vector); between reduce steps
    # its accumulators are stored and reloaded. The epilogue's own inputs (bias, residual)
    # are loaded once per output.
    vector_bytes = lanes * dtype(an.compute.acc_dtype).nbytes
    body = [i for i in range(len(an.compute.inputs)) if i not in an.post_only]
    loads = (an.input_traffic(tile.thread, vector_bytes, unit_step(an), body) * math.prod(an.reduce_extents)
             + an.input_traffic(tile.thread, vector_bytes, unit_step(an), an.post_only))
    steps = _reduce_steps(an, tile)
    spills = 2 * an.output_bytes(tile.thread) * (steps - 1)
    stages["l1"] = (loads + spills) * micro_tiles / (l1.bandwidth * core_util)

    inner = tile.thread[-1] if tile.thread else 1
    # A reduction with no vector of outputs vectorises along its reduce axis and pays
    # horizontal sums at the end.
    simd_eff = inner / _round_up(inner, lanes) if inner > 1 or not stages_inputs(an) else 0.5
    if stages_inputs(an):
        acc_vectors = math.prod(tile.thread[:-1]) * -(-inner // lanes) if tile.thread else 1
        latency_eff = min(1.0, acc_vectors / CPU_LATENCY_STREAMS)
    else:
        latency_eff = 1.0
    waves = -(-tiles // units)
    stages["compute"] = _padded_flops(an, tile) / (
        _peak(target, an.compute) * core_util * simd_eff * latency_eff
    ) + (waves * TASK_OVERHEAD_CYCLES + _output_math_cycles(an, tile, lanes) / (units * core_util)) / clock_hz(target)
    return finish(stages, tiles, waves, broken, moved)


def _output_math_cycles(an: TileAnalysis, tile: Tiling, lanes: int) -> float:
    """Cycles of the transcendentals evaluated once per output (the epilogue's, or an
    element-wise body's): on vectors where the tile's innermost row of outputs holds one,
    else one libm call per output and function."""
    c = an.compute
    per_output = c.post if c.is_reduction else c.body
    if per_output is None or not an.extents:
        return 0.0
    calls = sum(1 for x in walk(per_output) if isinstance(x, Call) and x.op in _MATH)
    if not calls:
        return 0.0
    outputs = math.prod(an.extents)
    if contiguous_run(tile.block, an.extents) >= lanes > 1:
        return calls * outputs * VECTOR_MATH_CYCLES / lanes
    return calls * outputs * SCALAR_MATH_CYCLES


def contiguous_run(block: Sequence[int], extents: Sequence[int]) -> int:
    """Outputs a tile of `block` holds one after another in memory: its innermost axis, times
    each next one out while the axes inside it are whole. The kernels walk such a run as one
    row (element-wise loop nests and GEMM columns merge the axes: compiler/schedule/merge_axes.py;
    a depthwise convolution computes whole planes), so a 14 x 14 map's epilogue runs on
    vectors: EfficientNet-B0's SiLU over 480 x 14 x 14 took 75 us on one Xeon thread beside its
    5 x 5 depthwise convolution, where one libm call per output was priced at 1.1 ms."""
    run = 1
    for b, e in zip(reversed(block), reversed(extents), strict=False):
        run *= min(b, e)
        if b < e:
            break
    return run


def dram_bytes(compute: Compute, tile: Tiling, target: Target) -> int:
    """Predicted DRAM bytes of `compute` run as `tile` (a fused row group's inputs and output
    cross DRAM once, whatever its rows per task: its stages meet in cache)."""
    if compute.stages:
        return group_bytes(compute)
    return estimate(compute, tile, target).dram_bytes
