"""The general CUDA kernel: any Compute, one register tile of outputs per thread.

A thread block covers `threads[d] * regs[d]` outputs along each spatial axis;
thread t owns outputs `base + r * threads[d]` (r < regs[d]), so neighbouring
threads write neighbouring elements (coalesced). Reductions run the whole
reduce space in one thread, with the register tile's accumulators side by
side: coordinates of a ragged edge are clamped for the loads (every load stays
in bounds, so the tile needs no branch inside the loop) and only the store is
guarded. Blocks walk the
tile space grid-stride, so any size fits the grid limits. The threads and register
tile are the plan's (`GeneralGeometry`, compiler/schedule/cuda_tile.py).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from compiler.codegen import cexpr
from compiler.codegen.cuda.expr import emit, value_ctype
from compiler.codegen.cuda.parts import (
    combine,
    decompose,
    epilogue,
    identity,
    linear,
    signature,
)
from compiler.ir.te import Compute
from compiler.schedule.cuda_launch import GeneralGeometry


def render_general(c: Compute, g: GeneralGeometry, symbol: str) -> str:
    """CUDA source of the general kernel for `c`."""
    ind = "    "
    nthreads = math.prod(g.threads)
    tiles = g.tiles(c)
    rank = len(c.axes)
    lines = [signature(c, symbol, nthreads) + " {"]
    lines += decompose("threadIdx.x", [f"th{d}" for d in range(rank)], g.threads, "  ")
    lines.append(f"  for (long long tile = blockIdx.x; tile < {math.prod(tiles)}LL; "
                 "tile += gridDim.x) {")
    lines += decompose("tile", [f"bk{d}" for d in range(rank)], tiles, ind)
    coords: dict[tuple[int, int], tuple[str, str]] = {}  # (axis, reg) -> (raw, clamped)
    for d, a in enumerate(c.axes):
        span = g.threads[d] * g.regs[d]
        lines.append(f"{ind}const long long base{d} = bk{d} * {span}LL + th{d};")
        for r in range(g.regs[d]):
            raw = f"o{d}_{r}"
            lines.append(f"{ind}const long long {raw} = base{d} + {r * g.threads[d]}LL;")
            clamped = raw
            if a.extent % span:
                clamped = f"q{d}_{r}"
                lines.append(f"{ind}const long long {clamped} = {raw} < {a.extent}LL ? {raw} : "
                             f"{a.extent - 1}LL;")
            coords[d, r] = (raw, clamped)
    combos = list(itertools.product(*(range(r) for r in g.regs)))
    guards = [" && ".join(f"{coords[d, r][0]} < {a.extent}LL"
                          for d, (a, r) in enumerate(zip(c.axes, combo, strict=True)))
              for combo in combos]
    bindings = [{a.name: coords[d, r][1] for d, (a, r) in enumerate(zip(c.axes, combo, strict=True))}
                for combo in combos]
    offsets = [linear([coords[d, r][1] for d, r in enumerate(combo)], c.shape) for combo in combos]
    counter = cexpr.new_counter()
    if c.is_reduction:
        lines += _reduction(c, bindings, counter, ind)
    for j, (guard, binding, offset) in enumerate(zip(guards, bindings, offsets, strict=True)):
        lines.append(f"{ind}if ({guard or '1'}) {{")
        acc = f"acc{j}" if c.is_reduction else None
        lines += epilogue(c, acc, binding, offset, counter, ind + "  ")
        lines.append(f"{ind}}}")
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def _reduction(c: Compute, bindings: list[dict[str, str]], counter: Iterator[int],
               ind: str) -> list[str]:
    """Accumulators acc0.. over the whole reduce space, one per register output."""
    acc_t = value_ctype(c.acc_dtype)
    lines = [f"{ind}{acc_t} acc{j} = {identity(c)};" for j in range(len(bindings))]
    depth = ind
    for d, a in enumerate(c.reduce_axes):
        lines.append(f"{depth}for (long long k{d} = 0; k{d} < {a.extent}LL; ++k{d}) {{")
        depth += "  "
    red = {a.name: f"k{d}" for d, a in enumerate(c.reduce_axes)}
    for j, binding in enumerate(bindings):
        value = emit(c.inputs, {**binding, **red}, counter, c.body, lines, depth)
        lines.append(f"{depth}acc{j} = {combine(c, f'acc{j}', value)};")
    for _ in c.reduce_axes:
        depth = depth[:-2]
        lines.append(f"{depth}}}")
    return lines
