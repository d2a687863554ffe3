"""The padded windows a CPU task would stage in cache-resident scratch (Roller's /
Welder's on-chip tile, on the CPU): the region analysis of the windows one task reads,
which compiler/schedule/stage_block.py weighs when the plan is built (`TileConfig.stage`)
and compiler/codegen/c/stage.py renders.

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
