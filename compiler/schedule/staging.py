"""Which padded windows a CPU task stages in cache-resident scratch, and over which block
(Roller's / Welder's on-chip tile, on the CPU): the region analysis of the windows one
task reads, decided when the plan is built (`TileConfig.stage`) and rendered by
compiler/codegen/c/stage.py.

A reduction over padded windows (depthwise convolution, padded pooling, a convolution
off the GEMM path) checks its loads against the tensor's bounds wherever a window may
leave it, and a checked load does not vectorize. Staged, each task first copies the box
of the input its tile reads, the halo included, into a scratch array on its stack, and
the micro-tiles read it without a check. The box comes from the loads' affine index
forms: its origin per task at run time, its size a compile-time bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.ir.affine import LinearForm, linear_form
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute, Load, walk

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
        """The name of the variable holding the box's first index along dimension d."""
        return f"s{self.scratch}_{d}"


def staged_block(c: Compute, block: Sequence[int], thread: Sequence[int]) -> tuple[int, ...]:
    """The task block over which reduction `c` (tiled `block` with micro-tiles `thread`,
    both within its extents) stages its padded windows, or () when it stages none.

    `block` is cut along its outer axes (halved, never below the micro-tile) until the
    boxes fit the scratch: a block chosen for cache reuse may span more of a feature map
    than one task can stage, and unstaged windows are read with checked loads that do
    not vectorize. Nothing is staged when some padded load is not affine in the axes,
    or when no cut makes the boxes fit."""
    if not staged_boxes(c, block):
        return ()
    cut = list(block)
    for d in range(len(cut)):
        while scratch_bytes(staged_boxes(c, cut)) > MAX_SCRATCH_BYTES and cut[d] > thread[d]:
            cut[d] = max(thread[d], -(-cut[d] // 2))
    return tuple(cut) if scratch_bytes(staged_boxes(c, cut)) <= MAX_SCRATCH_BYTES else ()


def scratch_bytes(staged: Sequence[StagedInput]) -> int:
    """Bytes of the boxes `staged` on one task's stack."""
    return sum(math.prod(s.shape) * dtype(s.dtype).nbytes for s in staged)


def padded_loads(c: Compute) -> list[Load]:
    """The distinct padded loads of `c`'s body."""
    return list({(ld.input, ld.indices, ld.pad): ld for ld in walk(c.body)
                 if isinstance(ld, Load) and ld.pad is not None}.values())


def staged_boxes(c: Compute, block: Sequence[int]) -> list[StagedInput]:
    """What one task of `block` would stage, per padded load ([] when some padded load
    is not affine in the axes, so none can be staged)."""
    lengths = {a.name: b for a, b in zip(c.axes, block, strict=True)}
    lengths |= {a.name: a.extent for a in c.reduce_axes}
    staged: list[StagedInput] = []
    for ld in padded_loads(c):
        forms = [linear_form(i) for i in ld.indices]
        if any(f is None or any(v not in lengths for v in f[1]) for f in forms):
            return []
        known = [f for f in forms if f is not None]
        shape = tuple(1 + sum(abs(k) * (lengths[v] - 1) for v, k in f[1].items()) for f in known)
        staged.append(StagedInput(len(c.inputs) + len(staged), ld.input, tuple(known), shape,
                                  ld.pad, c.inputs[ld.input].dtype))
    return staged
