"""Roller's rTile construction: hardware-aligned tiles built, not searched.

Only aligned shapes are ever considered (Roller's rules, mapped per kind):
- register tile (`TileConfig.thread`): sizes from {1, 2, 4, 8, 16, 32} (CPU:
  rows also 3 x 2^k, the innermost dim two or four SIMD vectors), small extents
  taken whole;
- block (`TileConfig.block`): the register tile times powers of two; the
  innermost dim a multiple of the transaction (CUDA 32 B, CPU one 64 B line)
  unless it spans the whole axis; CUDA threads per block a multiple of
  warp x 4, at most 512;
- reduce steps lcm(1, 8) growing x4 (CUDA up to 32, CPU up to 512); reduce
  axes of at most 8 are staged whole;
- shared-memory rows padded against bank conflicts (see compiler.cost.banks);
- padding waste of the last block on each axis bounded, the bound relaxed
  step by step when nothing fits.

Construction: grow the register tile from its smallest aligned size, one
dim at a time, always the dim whose next size saves the most traffic per
byte of footprint added, while it fits the registers; on the last few tiles of
that path (scale-up) grow the block the same way while it fits shared memory
(CPU: L2); scale out by shrinking the dims whose shrinking costs least traffic
until there are as many tiles as units; rank what was built with the
micro-performance model and keep the top k.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from compiler.cost.analysis import TileAnalysis
from compiler.cost.model import Estimate, estimate
from compiler.cost.resources import (
    cpu_vector_registers,
    cuda_resources,
    reduction_team,
    simd_lanes,
    smem_bytes,
    stages_inputs,
    threads_per_block,
    unit_step,
)
from compiler.ir.attention import match_attention
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute
from compiler.schedule.attention_tile import attention_tilings
from compiler.schedule.chain_members import chain_candidate
from compiler.schedule.cuda_attention_tile import cuda_attention_tilings
from compiler.schedule.partition import is_chain_group
from compiler.schedule.plan import TileConfig
from compiler.schedule.tilegraph.rowtile import row_group_tilings
from compiler.target.base import Target

REGISTER_SIZES = (1, 2, 4, 8, 16, 32)
# CPU register tiles: rows also from 3 x 2^k, so 16 vector registers can hold the classic
# 6 x 2-vector micro-kernel; the innermost dim at least two vectors wide (gcc keeps a
# one-vector-wide row of accumulators in memory: 8x8 ran 40x slower than 6x16 on AVX2).
CPU_REGISTER_ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
CPU_ROW_VECTORS = (2, 4)
WARP_PARTITIONS = 4  # threads per block: a multiple of warp x 4 ...
MAX_BLOCK_THREADS = 512  # ... and at most 512
CUDA_THREAD_REGISTERS = 128  # register-tile budget: leaves room for two 256-thread blocks
CUDA_TRANSACTION = 32  # bytes: the innermost block dim covers whole sectors
REDUCE_BASE = 8
REDUCE_GROWTH = 4
MAX_REDUCE_STEP = {"cuda": 32, "cpu": 512}
# Relaxation when nothing fits: (padding-waste bound, CUDA threads per block a multiple
# of this many warps). Axes like 7, 14 or 55 cannot make warp x 4 threads with
# power-of-two tiles; whole warps come next, then any count (0).
RELAXATION = ((0.1, WARP_PARTITIONS), (0.25, WARP_PARTITIONS), (0.25, 1), (0.5, 1),
              (math.inf, 0))
PATH_TAIL = 3  # tiles kept from the end of each growth path (the largest, best-reuse ones)


@dataclass(frozen=True)
class Candidate:
    """A constructed tiling and what the model predicts for it."""

    tile: TileConfig
    estimate: Estimate


Sizes = tuple[int, ...]


def construct(compute: Compute, target: Target, top_k: int = 5) -> list[Candidate]:
    """The best `top_k` aligned tilings of `compute` on `target`, fastest predicted first."""
    parts = match_attention(compute) if compute.stages else None
    if parts is not None:  # an attention group: query rows and keys per block
        tilings = cuda_attention_tilings if target.kind == "cuda" else attention_tilings
        return [Candidate(t, e) for t, e in tilings(compute, parts, target, top_k)]
    if is_chain_group(compute):  # its split and tile rows follow from capacity
        return [Candidate(*chain_candidate(compute, target))]
    if compute.stages:  # a fused row group: rows per task is its one choice
        return [Candidate(t, e) for t, e in row_group_tilings(compute, target, top_k)]
    an = TileAnalysis(compute)
    if 0 in an.extents:
        return [_trivial(an, target)]
    builder = _Builder(an, target)
    for waste, warps in RELAXATION:
        builder.thread_multiple = target.lanes * warps if warps else 1
        ranked = builder.ranked(waste)
        if ranked:
            return ranked[:max(1, top_k)]
    return [_trivial(an, target)]


def _trivial(an: TileAnalysis, target: Target) -> Candidate:
    """One output per task and thread: always fits (and is the only tiling of an empty output)."""
    ones = (1,) * len(an.extents)
    tile = TileConfig(ones, ones, tuple(max(1, min(REDUCE_BASE, e)) for e in an.reduce_extents))
    return Candidate(tile, estimate(an.compute, tile, target, an))


def _waste(extent: int, size: int) -> float:
    """Fraction of extra work from padding `extent` up to whole tiles of `size`."""
    return (-(-extent // size) * size - extent) / extent


def _ladder(base: Sequence[int], extent: int) -> list[int]:
    """Aligned sizes from `base` that fit `extent`, plus the extent itself when it is smaller
    than the largest (a small axis is taken whole rather than padded)."""
    sizes = [s for s in base if s <= extent]
    if extent < base[-1] and extent not in sizes:
        sizes.append(extent)
    return sorted(sizes) or [extent]


class _Builder:
    """Construction state for one Compute on one target."""

    def __init__(self, an: TileAnalysis, target: Target) -> None:
        self.an, self.target = an, target
        self.cuda = target.kind == "cuda"
        self.staged = stages_inputs(an)
        self.steps = self._reduce_steps()
        out_elem = dtype(an.compute.dtype).nbytes
        line = CUDA_TRANSACTION if self.cuda else target.levels[0].transaction
        self.inner_align = max(1, line // out_elem)
        self.vector_limit = max(1, 16 // out_elem) if self.cuda else simd_lanes(target, out_elem)
        self.ladders = [self._thread_ladder(d) for d in range(len(an.extents))]
        self.dram_tx = target.levels[0].transaction
        self.thread_multiple = target.lanes * WARP_PARTITIONS
        self.team = reduction_team(an, target.lanes) if self.cuda else 1
        if self.cuda:  # what a block gets without opting in to more (what codegen launches)
            x = target.extras
            self.smem_budget = int(x.get("smem_static_per_block",
                                         x.get("smem_per_block", target.level("smem").capacity)))
        self._registers: dict[Sizes, int] = {}
        self._block_paths: dict[Sizes, list[Sizes]] = {}
        self._register_path: list[Sizes] | None = None

    # -- alignment rules -------------------------------------------------

    def _thread_ladder(self, d: int) -> list[int]:
        extent, inner = self.an.extents[d], d == len(self.an.extents) - 1
        if inner and not self.cuda:
            base = [self.vector_limit * k for k in CPU_ROW_VECTORS]
        elif inner and not self.staged:  # CUDA element-wise: one 16-byte vector per thread
            base = [self.vector_limit * k for k in (1, 2, 4)]
        else:
            base = list(REGISTER_SIZES if self.cuda else CPU_REGISTER_ROWS)
        return _ladder(base, extent)

    def _reduce_steps(self) -> list[Sizes]:
        """Reduce-step tuples, smallest first: axes of at most 8 whole, the innermost larger
        axis stepped lcm(1, 8) x 4^k, other larger axes one element per step."""
        ext = self.an.reduce_extents
        large = [i for i, e in enumerate(ext) if e > REDUCE_BASE]
        base = [max(1, e) if e <= REDUCE_BASE else 1 for e in ext]
        if not large:
            return [tuple(base)]
        steps, s = [], REDUCE_BASE
        while s <= MAX_REDUCE_STEP[self.target.kind]:
            step = list(base)
            step[large[-1]] = min(s, ext[large[-1]])
            if tuple(step) not in steps:
                steps.append(tuple(step))
            s *= REDUCE_GROWTH
        return steps

    def aligned(self, block: Sizes, thread: Sizes, whole_warps: bool = True) -> bool:
        """Roller's alignment of a block: whole transactions on the innermost dim, and on
        CUDA (unless `whole_warps` is off) a thread count that is a multiple of
        `thread_multiple` (warp x 4 unless relaxed; whatever a single tile needs)."""
        ext = self.an.extents
        if ext and block[-1] < ext[-1] and block[-1] % self.inner_align:
            return False
        if not self.cuda or not whole_warps:
            return True
        threads = self.block_threads(block, thread)
        single = all(b >= e for b, e in zip(block, ext, strict=True))
        return threads <= MAX_BLOCK_THREADS and (single or threads % self.thread_multiple == 0)

    def thread_fits(self, thread: Sizes) -> bool:
        if self.cuda:
            return self.thread_registers(thread) <= CUDA_THREAD_REGISTERS
        return cpu_vector_registers(self.an, thread, self.target) <= self.target.registers

    def block_fits(self, block: Sizes, thread: Sizes) -> bool:
        step = self.steps[0]
        if not self.cuda:
            return self.an.footprint(block, step) <= self.target.level("l2").capacity
        tile = TileConfig(block, thread, step)
        threads = self.block_threads(block, thread)
        return (threads <= MAX_BLOCK_THREADS
                and smem_bytes(self.an, tile, self.target) <= self.smem_budget
                and self.thread_registers(thread) * threads <= self.target.registers)

    def block_threads(self, block: Sizes, thread: Sizes) -> int:
        """CUDA threads of a block: one per register tile, times the team per output of a
        contiguous row reduction."""
        return threads_per_block(TileConfig(block, thread, ())) * self.team

    def thread_registers(self, thread: Sizes) -> int:
        """32-bit registers one CUDA thread needs for register tile `thread`."""
        if thread not in self._registers:
            tile = TileConfig(thread, thread, unit_step(self.an))
            self._registers[thread] = cuda_resources(self.an, tile, self.target).registers
        return self._registers[thread]

    def block_too_small(self, block: Sizes, thread: Sizes) -> bool:
        """Whether a block must keep growing even without reuse to gain: too few CUDA
        threads to be aligned, or a CPU task under a quarter of L2 (task overhead)."""
        if self.cuda:
            return self.block_threads(block, thread) < self.target.lanes * WARP_PARTITIONS
        return self.an.footprint(block, self.steps[0]) < self.target.level("l2").capacity // 4

    # -- traffic the reuse scores compare ----------------------------------

    def register_traffic(self, thread: Sizes) -> int:
        """Bytes all register tiles read over the whole reduction (from smem / L1-L2)."""
        return self.an.input_bytes(thread) * self.an.tiles(thread)

    def block_traffic(self, block: Sizes) -> int:
        """Bytes all blocks move from DRAM / the outer cache."""
        return self.an.traffic(block, self.dram_tx).total

    # -- construction ------------------------------------------------------

    def _grow(self, start: Sizes, successors: Callable[[Sizes], Iterator[tuple[int, Sizes]]],
              traffic: Callable[[Sizes], int], footprint: Callable[[Sizes], int],
              fits: Callable[[Sizes], bool], keep_going: Callable[[Sizes], bool]) -> list[Sizes]:
        """Greedy growth: step the dim with the best reuse score (traffic saved / footprint
        added) while it fits; with no reuse left, keep stepping only while `keep_going`."""
        path, cur = [start], start
        while True:
            best, best_key = None, None
            for d, nxt in successors(cur):
                if not fits(nxt):
                    continue
                score = (traffic(cur) - traffic(nxt)) / max(1, footprint(nxt) - footprint(cur))
                # With reuse to gain, ties go to the smaller dim (square-ish tiles); without,
                # to the innermost dim (longer contiguous rows).
                key = (score, -nxt[d], d) if score > 0 else (score, 0, d)
                if best_key is None or key > best_key:
                    best, best_key = nxt, key
            if best is None or (best_key[0] <= 0 and not keep_going(cur)):
                return path
            path.append(best)
            cur = best

    def register_tiles(self) -> list[Sizes]:
        """The register-tile growth path (smallest first; the same in every relaxation)."""
        if self._register_path is None:
            self._register_path = self._grow_register_tiles()
        return self._register_path

    def _grow_register_tiles(self) -> list[Sizes]:
        start = tuple(ladder[0] for ladder in self.ladders)

        def successors(t: Sizes) -> Iterator[tuple[int, Sizes]]:
            for d, ladder in enumerate(self.ladders):
                i = ladder.index(t[d])
                if i + 1 < len(ladder):
                    yield d, (*t[:d], ladder[i + 1], *t[d + 1:])

        step = unit_step(self.an)
        return self._grow(start, successors, self.register_traffic,
                          lambda t: self.an.footprint(t, step), self.thread_fits, lambda t: False)

    def block_path(self, thread: Sizes) -> list[Sizes]:
        """The block growth path over register tile `thread` (the same in every relaxation)."""
        if thread in self._block_paths:
            return self._block_paths[thread]
        ext = self.an.extents

        def successors(b: Sizes) -> Iterator[tuple[int, Sizes]]:
            # CUDA: whole transactions on the innermost dim come first (a block short of
            # them is never aligned, so growing other dims before would leave no aligned
            # block on the path when those dims fill the budget).
            dims = range(len(b))
            if self.cuda and b and b[-1] < ext[-1] and b[-1] % self.inner_align:
                dims = range(len(b) - 1, len(b))
            for d in dims:
                if b[d] < ext[d]:  # the last step may take the axis whole instead of doubling
                    yield d, (*b[:d], min(b[d] * 2, ext[d]), *b[d + 1:])

        path = self._grow(thread, successors, self.block_traffic,
                          lambda b: self.an.footprint(b, self.steps[0]),
                          lambda b: self.block_fits(b, thread),
                          lambda b: self.block_too_small(b, thread))
        self._block_paths[thread] = path
        return path

    def blocks(self, thread: Sizes, waste: float) -> list[Sizes]:
        """Aligned blocks within the waste bound on the growth path over `thread`."""
        return [b for b in self.block_path(thread) if self.aligned(b, thread)
                and all(_waste(e, s) <= waste for e, s in zip(self.an.extents, b, strict=True))]

    def scale_out(self, block: Sizes, thread: Sizes) -> tuple[Sizes, Sizes]:
        """Shrink the dims whose halving adds least traffic until tiles >= units, keeping
        alignment (CUDA: halve the register tile with the block so the thread count stays).

        Where no halving keeps a CUDA block's threads whole warps x 4, one that keeps its
        rows whole transactions is taken: the kernel's launch makes its own thread count
        legal (compiler/schedule/cuda_tile.py), and a block left whole runs on a few SMs.
        MobileNetV2's 960 -> 320 projection at 7x7 stayed one 320 x 49 tile, 4 GEMM blocks
        for 132 SMs (126 us on an H200): 7 x 7 has no power-of-two split of whole warps."""
        while self.an.tiles(block) < self.target.units:
            halvings = self._halvings(block, thread)
            options = [h for h in halvings if self.aligned(h[2], h[3])] or halvings
            if not options:
                break
            _, _, block, thread = min(options)
        return block, thread

    def _halvings(self, block: Sizes, thread: Sizes) -> list[tuple[int, int, Sizes, Sizes]]:
        """Each dim's halving of `block` that adds tiles and keeps its rows whole
        transactions: (traffic added, dim, block, register tile)."""
        options = []
        for d in range(len(block)):
            if block[d] <= 1:
                continue
            b = (*block[:d], -(-block[d] // 2), *block[d + 1:])
            t = thread
            if (self.cuda and thread[d] > 1) or b[d] < thread[d]:
                smaller = [s for s in self.ladders[d] if s < thread[d]]
                if not smaller:
                    continue
                t = (*thread[:d], smaller[-1], *thread[d + 1:])
                b = (*b[:d], max(b[d], t[d]), *b[d + 1:])
            if d == len(block) - 1:
                # half a row rounded up to whole transactions and register tiles (a mean
                # over 144 channels as 96 + 48, not one task for the whole team)
                quantum = math.lcm(self.inner_align, t[d])
                b = (*b[:d], min(block[d], -(-b[d] // quantum) * quantum), *b[d + 1:])
            if self.aligned(b, t, whole_warps=False) and self.an.tiles(b) > self.an.tiles(block):
                # least traffic added first; on ties the outer dim, keeping rows long
                options.append((self.block_traffic(b) - self.block_traffic(block), d, b, t))
        return options

    def vector(self, thread: Sizes) -> int:
        """Elements per innermost access: the widest power of two up to 16 B (CUDA; and
        dividing the axis) that divides the register tile; on the CPU the SIMD lanes
        wherever a register tile's row holds a vector (the CPU renderer ends a row that
        is not whole vectors with an overlapping one), else the widest that divides it."""
        if not thread:
            return 1
        v = self.vector_limit
        if not self.cuda and thread[-1] >= v:
            return v
        while v > 1 and (thread[-1] % v or (self.cuda and self.an.extents[-1] % v)):
            v //= 2
        return v

    def tiles(self, waste: float) -> Iterator[TileConfig]:
        """Every constructed tiling under the waste bound (duplicates possible)."""
        for thread in self.register_tiles()[-PATH_TAIL:]:
            for block in self.blocks(thread, waste)[-PATH_TAIL:]:
                b, t = self.scale_out(block, thread)
                for step in self.steps:
                    tile = TileConfig(b, t, step, self.vector(t))
                    if not self.cuda or smem_bytes(self.an, tile, self.target) <= self.smem_budget:
                        yield tile

    def ranked(self, waste: float) -> list[Candidate]:
        """The constructed tilings that fit, fastest predicted first."""
        seen: dict[TileConfig, Candidate] = {}
        for tile in self.tiles(waste):
            if tile not in seen:
                seen[tile] = Candidate(tile, estimate(self.an.compute, tile, self.target, self.an))
        fitting = [c for c in seen.values() if c.estimate.fits]
        # Equal times: the tile that loads its other stages less wins (more slack).
        return sorted(fitting, key=lambda c: (c.estimate.time_us, sum(c.estimate.stages.values()),
                                               c.tile.block, c.tile.thread, c.tile.reduce_step))
