"""CPU kernels of fused row groups (compiler/schedule/tilegraph/rows.py): Welder's cache level.

A group (a Compute with stages) runs block of rows by block of rows: one task per
block, `tile.block[rows - 1]` rows of the innermost row axis (a last, shorter
block gets its own copy). In a task every member runs, in order, on just that
block: the stages write aligned stack scratch, which stays in L1 / L2 for the
members after them; only the group's inputs and output touch memory.

Each member is the ordinary kernel of its Compute cut to one block (row extents
1, ..., 1, n), tiled as the plan says (`TileConfig.members`, decided in
compiler/schedule/row_members.py), written as a static function that runs on the calling thread
(c.py writes its loop nest); the task passes it pointers to its block's rows:
an input read by rows at its first row, an input read whole as it is. Row-major
layout makes a block of rows one contiguous run of every such tensor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from compiler.codegen.c.team import kernel_params, mark_used, shared_tasks
from compiler.codegen.csource import CSource
from compiler.ir.dtypes import dtype
from compiler.ir.rows import RowSharing, block_rows, cut_to_rows, group_sharing, row_elems
from compiler.ir.te import Compute, TensorType
from compiler.schedule.plan import TileConfig

# Writes one member, tiled as the plan says, as `static void <name>(<params>)` running
# on the calling thread; returns whether its loops read padded loads with bounds checks.
MemberWriter = Callable[[CSource, Compute, TileConfig, str, Sequence[str]], bool]


def render_row_group(c: Compute, tile: TileConfig, symbol: str, src: CSource, params: Sequence[str],
                     header: str, write_member: MemberWriter) -> tuple[bool, bool]:
    """Write the group's members (each block's with its tiles in `tile.members`) and its
    team function `header`; (parallel, checked)."""
    sharing = group_sharing(c)
    g = sharing.rows
    extent = c.shape[g - 1]
    sizes = block_rows(c, tile.block[g - 1])
    block = sizes[0]
    members = c.members()
    if len(tile.members) != len(sizes) or any(len(tiles) != len(members) for tiles in tile.members):
        raise ValueError(f"tile {tile} plans no member tiles for {len(sizes)} blocks of {len(members)} members")
    checked = False
    for n, tiles in zip(sizes, tile.members, strict=True):
        for k, (m, t) in enumerate(zip(members, tiles, strict=True)):
            cut = cut_to_rows(m, g, n, sharing)
            checked |= write_member(src, cut, t, f"{symbol}_m{k}_{n}", kernel_params(cut))

    blocks = -(-extent // block)
    tasks = math.prod(c.shape[:g - 1]) * blocks
    parallel = tasks > 1 and not tile.serial
    with src.block(header):
        mark_used(src, params)
        with shared_tasks(src, parallel), src.block(f"for (int64_t t = 0; t < {tasks}L; ++t)"):
            src.line(f"const int64_t first = t / {blocks}L * {extent}L + t % {blocks}L * {block}L;")
            src.line(f"const int64_t n = {extent}L - t % {blocks}L * {block}L;")
            for k, s in enumerate(c.stages):
                src.line(f"{dtype(s.dtype).c_type} s{k}[{block * row_elems(s, g)}] __attribute__((aligned(64)));")
            for j, n in enumerate(sizes):
                test = f"if (n >= {block}L)" if j == 0 and len(sizes) > 1 else "else" if j else ""
                with src.block(test):
                    for k, m in enumerate(members):
                        out = f"s{k}" if k < len(c.stages) else f"out + first * {row_elems(c, g)}L"
                        args = [out] + [_pointer(p, t, g, len(c.inputs), sharing) for p, t in enumerate(m.inputs)]
                        src.line(f"{symbol}_m{k}_{n}({', '.join(args)});")
    return parallel, checked


def _pointer(p: int, t: TensorType, g: int, inputs: int, sharing: RowSharing) -> str:
    """The argument for member input `p`: a stage's scratch, or a group input at the
    block's first row (read by rows) or whole."""
    if p >= inputs:
        return f"s{p - inputs}"
    return f"in{p} + first * {row_elems(t, g)}L" if sharing.by_rows[p] else f"in{p}"
