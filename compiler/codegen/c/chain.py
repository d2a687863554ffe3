"""CPU kernels of convolution chain groups (compiler/schedule/partition.py): GraphTurbo's
depth-first instances with Welder's tile propagation.

One task per (batch index, tile of `ChainTiling.rows` output rows). In a task every
member runs, in order, on its rows of the tile (the tile plus its halo, clipped to the
image: compiler/ir/chain.py), writing a per-thread scratch sized for the largest task
(a few hundred KiB: it stays in L2), so an inverted residual's expanded tensor never
reaches memory. Tasks differ only where halos meet the image's edges: each kind of
task gets its own copy of the members (a table maps tiles to kinds). Each member is
the ordinary kernel of its cut Compute, tiled as the plan says (`TileConfig.members`),
written by the caller's `MemberWriter`. NCHW tiles of rows are strided per channel, so
the sink writes scratch that is copied out per channel (unless a tile is the image).
A member the plan blocks as a GEMM (its tile's `gemm`) packs its operands, and one it
computes plane by plane (its tile's `plane`) copies its planes, into a last region of
the thread's scratch, shared by all such members (they run one at a time).
"""

from __future__ import annotations

import math

from compiler.codegen.c.gemm import SCRATCH, scratch_floats
from compiler.codegen.c.rows import MemberWriter
from compiler.codegen.c.team import kernel_params, mark_used, shared_tasks
from compiler.codegen.csource import CSource
from compiler.ir.chain import ChainShape, TaskKind, chain_shape, cut_member, input_row, task_kinds
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute
from compiler.schedule.plan import TileConfig

_ALIGN = 16  # elements: scratch regions start on cache lines


def render_chain(c: Compute, tile: TileConfig, symbol: str, src: CSource, params: list[str], header: str,
                 write_member: MemberWriter) -> tuple[bool, bool]:
    """Write the chain's members per task kind and its team function `header`;
    (parallel, checked)."""
    shape = chain_shape(c)
    if shape is None or tile.chain is None:
        raise ValueError(f"the plan runs {symbol} as a convolution chain, which it is not")
    kinds, table = task_kinds(shape, tile.chain.rows)
    members = c.members()
    if len(tile.members) != len(kinds) or any(len(t) != len(members) for t in tile.members):
        raise ValueError(f"tile {tile} plans no member tiles for {len(kinds)} task kinds of {len(members)} members")
    checked = False
    for v, (kind, tiles) in enumerate(zip(kinds, tile.members, strict=True)):
        for k, t in enumerate(tiles):
            cut = cut_member(c, shape, k, kind.spans)
            scratch = [f"float* restrict {SCRATCH}"] if _member_scratch(t) else []
            checked |= write_member(src, cut, t, f"{symbol}_m{k}_v{v}", [*kernel_params(cut), *scratch])
    whole = len(table) == 1
    offsets, total = _scratch(c, kinds, whole)
    member_floats = max((_member_scratch(t) for tiles in tile.members for t in tiles), default=0)
    tasks = shape.batch * len(table)
    parallel = tasks > 1 and not tile.serial
    ctype = dtype(c.dtype).c_type
    src.line("#include <stdlib.h>")
    src.line("#include <string.h>")
    with src.block(header):
        mark_used(src, params)
        src.line(f"static const unsigned char kind[{len(table)}] = {{{', '.join(map(str, table))}}};")
        size = total * dtype(c.dtype).nbytes + 4 * member_floats
        src.line(f"{ctype}* s = ({ctype}*)aligned_alloc(64, {size}UL);")
        with shared_tasks(src, parallel), src.block(f"for (int64_t t = 0; t < {tasks}L; ++t)"):
            src.line(f"const int64_t b = t / {len(table)}L, start = t % {len(table)}L * {tile.chain.rows}L;")
            with src.block(f"switch (kind[t % {len(table)}L])"):
                for v, kind in enumerate(kinds):
                    with src.block(f"case {v}:"):
                        scratches = tuple(_member_scratch(t) > 0 for t in tile.members[v])
                        _task(src, c, shape, kind, v, symbol, offsets, whole, scratches, total)
                        src.line("break;")
        src.line("free(s);")
    return parallel, checked


def _member_scratch(tile: TileConfig) -> int:
    """Floats of the thread's scratch a member's tile works in: a GEMM's packed operands,
    a per-channel convolution's plane copies (0: the loop nest needs none)."""
    if tile.gemm is not None:
        return scratch_floats(tile.gemm)
    return tile.plane.scratch_floats if tile.plane is not None else 0


def _scratch(c: Compute, kinds: tuple[TaskKind, ...], whole: bool) -> tuple[list[int], int]:
    """Each stage's (then, unless tiles are whole images, the sink's) scratch offset in
    elements, sized for the largest task kind; and the total."""
    offsets, total = [], 0
    members = c.members() if not whole else c.members()[:-1]
    for k, m in enumerate(members):
        offsets.append(total)
        most = max(math.prod(m.shape[1:]) // m.shape[2] * kind.spans[k].count for kind in kinds)
        total += -(-most // _ALIGN) * _ALIGN
    return offsets, max(total, _ALIGN)


def _task(src: CSource, c: Compute, shape: ChainShape, kind: TaskKind, v: int, symbol: str,
          offsets: list[int], whole: bool, scratches: tuple[bool, ...], member_scratch: int) -> None:
    """One kind of task: every member on its rows (`scratches`: those that work in scratch,
    handed the region at `member_scratch`), then the tile copied out."""
    groups = len(c.inputs)
    members = c.members()
    cols = c.shape[3]
    for k, m in enumerate(members):
        sink = k == len(members) - 1
        out = f"out + b * {math.prod(c.shape[1:])}L" if sink and whole else f"s + {offsets[k]}"
        args = [out]
        for p, t in enumerate(m.inputs):
            if p >= groups:
                args.append(f"s + {offsets[p - groups]}")
                continue
            a = shape.access[k].get(p)
            per_batch = math.prod(t.shape[1:])
            if a is None or a.kind == "whole":
                args.append(f"in{p}")
            elif a.kind == "batch":
                args.append(f"in{p} + b * {per_batch}L")
            else:
                scale, first = input_row(shape, k, p, kind.spans[k].first)
                args.append(f"in{p} + b * {per_batch}L + ({scale}L * start + {first}L) * {t.shape[3]}L")
        if scratches[k]:
            args.append(f"(float*)(s + {member_scratch})")
        src.line(f"{symbol}_m{k}_v{v}({', '.join(args)});")
    if whole:
        return
    plane = c.shape[2] * cols
    run = kind.rows * cols
    size = dtype(c.dtype).nbytes
    with src.block(f"for (int64_t ch = 0; ch < {c.shape[1]}L; ++ch)"):
        src.line(f"memcpy(out + b * {math.prod(c.shape[1:])}L + ch * {plane}L + start * {cols}L, "
                 f"s + {offsets[-1]} + ch * {run}L, {run * size}UL);")
