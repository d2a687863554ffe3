"""Padded windows staged in cache-resident scratch (Roller's / Welder's on-chip tile, on the CPU).

A reduction over padded windows (depthwise convolution, padded pooling, a
convolution off the GEMM path) checks its loads against the tensor's bounds
wherever a window may leave it. On a small feature map that is most of the
map, and a checked load does not vectorize (those kernels are built without
loop if-conversion: c/workarounds.py). Instead, each task first copies the box
of the input its tile reads, the halo included, into a scratch array on its
stack: rows clipped to the part inside the tensor and copied whole, the rest
filled with the pad value. The micro-tiles then read the scratch without a
single check. The box comes from the loads' affine index forms (the region
analysis): its origin per task at run time, its size a compile-time bound.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.codegen.cexpr import clip_lines, stored_literal
from compiler.codegen.csource import CSource
from compiler.ir.affine import LinearForm, linear_form, row_major_strides
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute, Expr, Load, TensorType, Var, substitute, walk

MAX_SCRATCH_BYTES = 64 << 10  # per task, on the thread's stack; beyond it, L1 / L2 would not hold it


@dataclass(frozen=True)
class StagedInput:
    """The box of input `source` one task reads, copied into the Compute's input `scratch`."""

    scratch: int
    source: int
    forms: tuple[LinearForm, ...]  # the load's index, per dimension of the source
    shape: tuple[int, ...]  # the box's size bound, per dimension
    pad: float | int | bool
    dtype: str

    def origin(self, d: int) -> str:
        """The C variable holding the box's first index along dimension d."""
        return f"s{self.scratch}_{d}"


def staging_block(c: Compute, block: Sequence[int], thread: Sequence[int]) -> list[int]:
    """`block`, cut along its outer axes (halved, never below the micro-tile `thread`)
    until the boxes of its padded windows fit the scratch: a block chosen for cache
    reuse may span more of a feature map than one task can stage, and unstaged windows
    are read with checked loads that do not vectorize. `block` itself when it already
    fits, when nothing can be staged, or when no cut makes it fit."""
    cut = list(block)
    for d in range(len(cut)):
        while _scratch_bytes(c, cut) > MAX_SCRATCH_BYTES and cut[d] > thread[d]:
            cut[d] = max(thread[d], -(-cut[d] // 2))
    return cut if _scratch_bytes(c, cut) <= MAX_SCRATCH_BYTES else list(block)


def _scratch_bytes(c: Compute, block: Sequence[int]) -> int:
    """Bytes of the boxes one task of `block` stages (0 when it stages nothing)."""
    return _bytes(_boxes(c, block))


def _bytes(staged: Sequence[StagedInput]) -> int:
    return sum(math.prod(s.shape) * dtype(s.dtype).nbytes for s in staged)


def stage_padded_loads(c: Compute, block: Sequence[int]) -> tuple[Compute, list[StagedInput]]:
    """`c` with each padded load whose indices are affine in its axes reading a scratch
    input instead (index minus the box's origin, no pad), and what to stage; `c` and
    no staging when some padded load cannot be staged or the boxes are too big."""
    staged = _boxes(c, block)
    if not staged or _bytes(staged) > MAX_SCRATCH_BYTES:
        return c, []
    padded = _padded_loads(c)
    by_load = {(ld.input, ld.indices, ld.pad): s for ld, s in zip(padded, staged, strict=True)}

    def read_scratch(e: Expr) -> Expr | None:
        s = by_load.get((e.input, e.indices, e.pad)) if isinstance(e, Load) and e.pad is not None else None
        if s is None:
            return None
        return Load(s.scratch, tuple(i - Var(s.origin(d)) for d, i in enumerate(e.indices)), e.dtype)

    inputs = (*c.inputs, *(TensorType(s.shape, s.dtype) for s in staged))
    return dataclasses.replace(c, body=substitute(c.body, read_scratch), inputs=inputs), staged


def _padded_loads(c: Compute) -> list[Load]:
    """The distinct padded loads of `c`'s body."""
    return list({(ld.input, ld.indices, ld.pad): ld for ld in walk(c.body)
                 if isinstance(ld, Load) and ld.pad is not None}.values())


def _boxes(c: Compute, block: Sequence[int]) -> list[StagedInput]:
    """What one task of `block` would stage, per padded load ([] when some padded load
    is not affine in the axes, so none can be staged)."""
    lengths = {a.name: b for a, b in zip(c.axes, block, strict=True)}
    lengths |= {a.name: a.extent for a in c.reduce_axes}
    staged: list[StagedInput] = []
    for ld in _padded_loads(c):
        forms = [linear_form(i) for i in ld.indices]
        if any(f is None or any(v not in lengths for v in f[1]) for f in forms):
            return []
        known = [f for f in forms if f is not None]
        shape = tuple(1 + sum(abs(k) * (lengths[v] - 1) for v, k in f[1].items()) for f in known)
        staged.append(StagedInput(len(c.inputs) + len(staged), ld.input, tuple(known), shape,
                                  ld.pad, c.inputs[ld.input].dtype))
    return staged


def write_staging(src: CSource, s: StagedInput, c: Compute) -> None:
    """Declare the scratch `in<scratch>` and the box origin of the current task (spatial
    axis d of `c` spans b<d> .. b<d> + e<d> - 1), and fill the box: rows clipped to the
    tensor and copied, everything outside it the pad value."""
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
                   origins: Sequence[str], pad: str, ctype: str) -> None:
    """Fill dense row-major `dst` (shape `box`) from the box of tensor `source` whose first
    index is `origins` (C expressions): rows clipped to the tensor and copied, everything
    outside it `pad`."""
    rank, inner = len(box), box[-1]
    strides = row_major_strides(source_shape)
    with src.block(""):
        for d in range(rank - 1):
            src.line(f"for (int64_t z{d} = 0; z{d} < {box[d]}L; ++z{d})")
        with src.block(""):
            row = " + ".join(f"z{d} * {math.prod(box[d + 1:])}L" for d in range(rank - 1)) or "0"
            src.line(f"{ctype}* const dst = {dst} + {row};")
            src.line(f"int64_t lo = 0, hi = {inner};")
            for d in range(rank - 1):
                src.line(f"if ((uint64_t)({origins[d]} + z{d}) >= {source_shape[d]}UL) hi = 0;")
            src.extend(clip_lines(origins[rank - 1], 1, source_shape[-1]))
            src.line("if (hi < lo) hi = lo;")
            base = " + ".join([*(f"({origins[d]} + z{d}) * {strides[d]}L" for d in range(rank - 1)),
                               origins[rank - 1]])
            src.line(f"for (int64_t z = 0; z < lo; ++z) dst[z] = {pad};")
            src.line(f"for (int64_t z = hi; z < {inner}L; ++z) dst[z] = {pad};")
            src.line(f"for (int64_t z = lo; z < hi; ++z) dst[z] = {source}[{base} + z];")
