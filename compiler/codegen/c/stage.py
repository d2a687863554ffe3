"""Padded windows staged in cache-resident scratch, rendered: each task copies the boxes
the plan's `TileConfig.stage` block reads (compiler/schedule/stage_block.py decides which
windows are staged and over which block) into arrays on its stack, rows clipped to the
part inside the tensor and copied whole, the rest filled with the pad value; the
micro-tiles then read the scratch without a single bounds check (a checked load does
not vectorize: those kernels are built without loop if-conversion, c/workarounds.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from compiler.codegen.cexpr import clip_lines, stored_literal
from compiler.codegen.csource import CSource
from compiler.ir.affine import row_major_strides
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute, Expr, Load, TensorType, Var, substitute
from compiler.schedule.staging import StagedInput, padded_loads, staged_boxes

# A staged box's rows are a few hundred bytes. As loops, gcc turns their copies into
# memcpy, which it expands inline as `rep movsq` when tuning for some cores; starting that
# string move on each row took 53% of a 3x3 max-pool's time (64 x 56 x 56, one thread:
# 223 -> 125 us without it). Only units that stage get this: as a flag for every kernel
# it cost efficientnet_b0 about 10% at 2 threads.
NO_COPY_CALLS = '#pragma GCC optimize ("no-tree-loop-distribute-patterns")'


def stage_padded_loads(c: Compute, block: Sequence[int]) -> tuple[Compute, list[StagedInput]]:
    """`c` with each padded load reading a scratch input instead (index minus the box's
    origin, no pad), and what one task of `block` stages (the plan's `TileConfig.stage`:
    compiler/schedule/stage_block.py decided that the boxes can be staged and fit)."""
    staged = staged_boxes(c, block)
    if not staged:
        raise ValueError(f"the plan stages the padded windows of {block}, but they cannot be staged")
    padded = padded_loads(c)
    by_load = {(ld.input, ld.indices, ld.pad): s for ld, s in zip(padded, staged, strict=True)}

    def read_scratch(e: Expr) -> Expr | None:
        s = by_load.get((e.input, e.indices, e.pad)) if isinstance(e, Load) and e.pad is not None else None
        if s is None:
            return None
        return Load(s.scratch, tuple(i - Var(s.origin(d)) for d, i in enumerate(e.indices)), e.dtype)

    inputs = (*c.inputs, *(TensorType(s.shape, s.dtype) for s in staged))
    return dataclasses.replace(c, body=substitute(c.body, read_scratch), inputs=inputs), staged


def write_staging(src: CSource, s: StagedInput, c: Compute) -> None:
    """Declare the scratch `in<scratch>` and the box origin of the current task (spatial
    axis d of `c` spans b<d> .. b<d> + e<d> - 1), and fill the box: rows clipped to the
    tensor and copied, everything outside it the pad value."""
    src.define({NO_COPY_CALLS: [NO_COPY_CALLS]})
    spatial = {a.name: d for d, a in enumerate(c.axes)}
    reduce_top = {a.name: a.extent - 1 for a in c.reduce_axes}
    source_shape = c.inputs[s.source].shape
    ctype = dtype(s.dtype).c_type
    src.line(f"{ctype} in{s.scratch}[{math.prod(s.shape)}] __attribute__((aligned(64)));")
    for d, (const, coefs) in enumerate(s.forms):
        terms = [str(const)]
        for v, k in coefs.items():  # each variable at the end of its range that minimizes k * v
            if v in spatial:
                at = f"b{spatial[v]}" if k > 0 else f"(b{spatial[v]} + e{spatial[v]} - 1)"
            else:
                at = "0" if k > 0 else str(reduce_top[v])
            terms.append(f"{k} * {at}")
        src.line(f"const int64_t {s.origin(d)} = {' + '.join(terms)};")
    write_box_copy(src, f"in{s.scratch}", f"in{s.source}", source_shape, s.shape,
                   [s.origin(d) for d in range(len(s.shape))], stored_literal(s.pad, s.dtype), ctype)


def write_box_copy(src: CSource, dst: str, source: str, source_shape: Sequence[int], box: Sequence[int],
                   origins: Sequence[str], pad: str, ctype: str, shared: bool = False,
                   phases: int = 1, span: tuple[int, str, str] | tuple[int, str, str, str] | None = None) -> None:
    """Fill dense row-major `dst` (shape `box`) from the box of tensor `source` whose first
    index is `origins` (C expressions): rows clipped to the tensor and copied, everything
    outside it `pad`. `shared`: the rows are shared among the OpenMP team (a work-shared
    loop, which every thread of the team must reach; it ends on a barrier). `phases` > 1:
    each row of `dst` holds its columns split by phase (column x at (x % phases) * width
    + x / phases, width = ceil(box[-1] / phases), the last ones the pad value). `span`
    (dimension, first, end: C expressions): only the indices from first to end along that
    dimension (not the last) are filled; a fourth element (a C expression) moves them that
    many floats down in `dst`, so that a buffer holding only the span's rows is filled
    (c/direct.py `write_task_copy`: a task's first row at row 0)."""
    rank, inner = len(box), box[-1]
    width = -(-inner // phases)
    strides = row_major_strides(source_shape)
    with src.block(""):
        if shared and rank > 1:
            src.line(f"#pragma omp for collapse({rank - 1}) schedule(static)")
        for d in range(rank - 1):
            first, end = span[1:3] if span is not None and span[0] == d else ("0", f"{box[d]}L")
            src.line(f"for (int64_t z{d} = {first}; z{d} < {end}; ++z{d})")
        with src.block(""):
            row = " + ".join(f"z{d} * {math.prod(box[d + 1:-1]) * width * phases}L" for d in range(rank - 1)) or "0"
            lower = f" - {span[3]}" if span is not None and len(span) > 3 else ""
            src.line(f"{ctype}* const dst = {dst} + ({row}{lower});")
            src.line(f"int64_t lo = 0, hi = {inner};")
            for d in range(rank - 1):
                src.line(f"if ((uint64_t)({origins[d]} + z{d}) >= {source_shape[d]}UL) hi = 0;")
            src.extend(clip_lines(origins[rank - 1], 1, source_shape[-1]))
            src.line("if (hi < lo) hi = lo;")
            base = " + ".join([*(f"({origins[d]} + z{d}) * {strides[d]}L" for d in range(rank - 1)),
                               origins[rank - 1]])
            if phases == 1:
                src.line(f"for (int64_t z = 0; z < lo; ++z) dst[z] = {pad};")
                src.line(f"for (int64_t z = hi; z < {inner}L; ++z) dst[z] = {pad};")
                src.line(f"for (int64_t z = lo; z < hi; ++z) dst[z] = {source}[{base} + z];")
                return
            # phase f holds columns f, f + phases, ...: those inside [lo, hi) are j in [a, b)
            src.line(f"for (int64_t f = 0; f < {phases}L; ++f)")
            with src.block(""):
                src.line(f"{ctype}* const dp = dst + f * {width}L;")
                src.line(f"const int64_t at = {base} + f;")
                src.line(f"const int64_t a = (lo - f + {phases - 1}L) / {phases}L, b = (hi - f + {phases - 1}L) / {phases}L;")
                src.line(f"for (int64_t j = 0; j < a; ++j) dp[j] = {pad};")
                src.line(f"for (int64_t j = b; j < {width}L; ++j) dp[j] = {pad};")
                src.line(f"for (int64_t j = a; j < b; ++j) dp[j] = {source}[at + j * {phases}L];")
