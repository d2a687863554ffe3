"""The CUDA kernel of a fused row group (compiler/schedule/tilegraph/rows.py): Welder's
shared-memory level on the GPU.

A softmax is four kernels and a layer norm three when each member runs alone, each
streaming the whole tensor through device memory. As one group, a thread block takes
one row at a time (grid-stride over the rows) and runs every member on it in order:

- an element-wise member: the block's threads stride over the row's elements
  (neighbouring threads on neighbouring elements);
- a reduction to one value per row (softmax's max and sum, layer norm's moments):
  every thread folds a strided share, then warp shuffles and one exchange through
  shared memory combine the shares; thread 0 stores the result;
- a reduction to several values per row: one thread per value, in order.

A member's output is a stage in shared memory (the group is formed only when a row of
its stages fits, `ROW_STAGE_BYTES` in compiler/schedule/cuda_tile.py, which also sizes the
block), unless the plan has its readers recompute it (an element-wise stage of a row too
long for shared memory: `RowGroupGeometry.recomputed`); the last member writes the group's
output. Only the
group's inputs and output touch device memory. Barriers separate the members and the
rows, and every thread reaches each of them.

Members are rendered like any kernel's body, with `out` and `in0`.. re-pointed at the
row for each member: a group input read by rows at the row's first element, one read
whole as it is, a stage at its shared array.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from compiler.codegen import cexpr
from compiler.codegen.cuda.expr import emit, storage_ctype, value_ctype
from compiler.codegen.cuda.parts import (
    INT_INDEX_LIMIT,
    combine,
    decompose,
    epilogue,
    identity,
    signature,
    team_reduce,
)
from compiler.ir.recompute import recompute
from compiler.ir.rows import RowSharing, cut_to_rows, group_sharing, row_elems
from compiler.ir.te import Compute, loads_of
from compiler.schedule.cuda_launch import WARP, RowGroupGeometry


def render_row_group(c: Compute, geometry: RowGroupGeometry, symbol: str) -> str:
    """CUDA source of the fused row-group kernel for `c` (a Compute with stages)."""
    recomputed = set(geometry.recomputed)
    if recomputed:  # their readers evaluate them: no member runs them, no array holds them
        c = recompute(c, recomputed)
    sharing = group_sharing(c)
    g, members = sharing.rows, c.members()
    counter = cexpr.new_counter()
    lines = [signature(c, symbol, geometry.threads, out="dst", prefix="arg") + " {"]
    for k, s in enumerate(c.stages):
        if k not in recomputed:
            lines.append(f"  __shared__ {storage_ctype(s.dtype)} s{k}[{max(1, row_elems(s, g))}];")
    lines.append(f"  for (long long row = blockIdx.x; row < {geometry.rows}LL; row += gridDim.x) {{")
    for k, m in enumerate(members):
        if k in recomputed:
            continue
        cut = cut_to_rows(m, g, 1, sharing)
        lines.append("    {")
        lines += _pointers(c, cut, k, sharing)
        lines += _member(cut, g, geometry.threads, counter, "      ")
        lines += ["    }", "    __syncthreads();"]
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def _pointers(c: Compute, m: Compute, k: int, sharing: RowSharing) -> list[str]:
    """`out` and the `in0`.. member `k` (already cut to one row) reads, pointed at this row."""
    g, inputs = sharing.rows, len(c.inputs)
    last = k == len(c.stages)
    out = f"dst + row * {row_elems(c, g)}LL" if last else f"s{k}"
    lines = [f"      {storage_ctype(m.dtype)}* __restrict__ out = {out};"]
    read = {ld.input for ld in loads_of(m)}
    for p, t in enumerate(m.inputs):
        if p not in read:
            continue
        source = (f"s{p - inputs}" if p >= inputs else
                  f"arg{p} + row * {row_elems(t, g)}LL" if sharing.by_rows[p] else f"arg{p}")
        lines.append(f"      const {storage_ctype(t.dtype)}* __restrict__ in{p} = {source};")
    return lines


def _member(m: Compute, g: int, threads: int, counter: Iterator[int], ind: str) -> list[str]:
    """One member on the current row (its row axes are index 0 after the cut)."""
    rest = m.axes[g:]
    names = {a.name: "0" for a in m.axes[:g]}
    spatial = [f"e{d}" for d in range(len(rest))]
    names |= {a.name: v for a, v in zip(rest, spatial, strict=True)}
    elems = max(1, math.prod(a.extent for a in rest))
    if m.is_reduction and elems == 1:
        return _block_reduction(m, names, threads, counter, ind)
    lines = [f"{ind}for ({_index_type(elems)} e = threadIdx.x; e < {elems}; e += {threads}) {{"]
    lines += decompose("e", spatial, [a.extent for a in rest], ind + "  ")
    acc = None
    if m.is_reduction:  # several values per row: each thread folds its own in order
        acc = "acc"
        lines.append(f"{ind}  {value_ctype(m.acc_dtype)} acc = {identity(m)};")
        lines += _fold(m, names, "0", "1", counter, ind + "  ")
    lines += epilogue(m, acc, names, "e", counter, ind + "  ")
    return [*lines, f"{ind}}}"]


def _index_type(n: int) -> str:
    return "int" if n <= INT_INDEX_LIMIT else "long long"


def _fold(m: Compute, names: dict[str, str], start: str, step: str, counter: Iterator[int],
          ind: str) -> list[str]:
    """Fold reduce indices start, start + step, .. of `m`'s body into `acc`."""
    length = math.prod(a.extent for a in m.reduce_axes)
    reduce_names = [f"k{d}" for d in range(len(m.reduce_axes))]
    local = names | {a.name: r for a, r in zip(m.reduce_axes, reduce_names, strict=True)}
    lines = [f"{ind}for ({_index_type(length)} r = {start}; r < {length}; r += {step}) {{"]
    lines += decompose("r", reduce_names, [a.extent for a in m.reduce_axes], ind + "  ")
    value = emit(m.inputs, local, counter, m.body, lines, ind + "  ")
    return [*lines, f"{ind}  acc = {combine(m, 'acc', value)};", f"{ind}}}"]


def _block_reduction(m: Compute, names: dict[str, str], threads: int, counter: Iterator[int],
                     ind: str) -> list[str]:
    """The whole block reduces the row to one value; thread 0 stores it."""
    acc_t = value_ctype(m.acc_dtype)
    warps = threads // WARP
    lines = [f"{ind}{acc_t} acc = {identity(m)};"]
    lines += _fold(m, names, "threadIdx.x", str(threads), counter, ind)
    if warps > 1:
        lines.append(f"{ind}__shared__ {acc_t} part[{warps}];")
    lines += team_reduce(m, warps, "part", "threadIdx.x / 32", "threadIdx.x % 32", ind)
    lines.append(f"{ind}if (threadIdx.x == 0) {{")
    lines += epilogue(m, "acc", names, "0", counter, ind + "  ")
    return [*lines, f"{ind}}}"]
