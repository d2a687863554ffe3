"""Element-wise kernels that read across their innermost axis: a Transpose, a copy to
channels-last, any body whose loads are strided along the output's contiguous axis.

Vectorized along that axis, every lane of such a load is a separate cache line (gcc
gathers them, or loads them one by one: a [255, 1344] transpose ran at 2.5 cycles an
element, a third of onnxruntime's speed). Where the body is contiguous along another
axis instead, the kernel computes L x L tiles as L vectors along that axis, one per
output column, turns the tile in registers (`transpose_lines`) and stores L rows: every
load and store a whole vector (compiler/codegen/c/kernel.py `_turned`).
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.codegen.c.vector import vectorizes
from compiler.ir.affine import load_stride
from compiler.ir.te import Compute, Load, walk

TURN_LANES = (4, 8, 16)  # square tiles transpose_lines turns (float32 vectors of SSE to AVX-512)


def turned_axis(c: Compute, block: Sequence[int], lanes: int) -> int | None:
    """The axis along which element-wise `c` (tasks of `block`) runs as vectors turned
    before the store, or None: where its loads are contiguous (or constant) along the
    innermost axis already, or no other axis of at least `lanes` per task reads some
    input contiguously and vectorizes the whole body."""
    n = len(c.axes)
    if lanes not in TURN_LANES or n < 2 or c.dtype != "float32" or c.is_reduction or block[-1] < lanes:
        return None
    loads = [e for e in walk(c.body) if isinstance(e, Load)]
    inner = c.axes[-1].name
    if all(load_stride(ld, c.inputs[ld.input].shape, inner) in (0, 1) for ld in loads):
        return None
    for d in range(n - 2, -1, -1):
        var = c.axes[d].name
        if (block[d] >= lanes and any(load_stride(ld, c.inputs[ld.input].shape, var) == 1 for ld in loads)
                and vectorizes(c.body, var, c.inputs, c.dtype)):
            return d
    return None
