"""Whether a CPU reduction takes the row-reduction path rather than register micro-tiles,
decided when the plan is built (`TileConfig.row_reduction`) and rendered by
compiler/codegen/c/kernel.py.

A reduction whose last reduce axis walks some input contiguously while its innermost
output axis does not (softmax / layer-norm style rows, reductions over the last axis)
folds each output's row into partial accumulators, vector-wide along that axis; micro-
tiles would read the row one strided element per output. Rows shorter than two of the
tile's vectors, or than one of the target's, leave the partials mostly empty: they stay on
micro-tiles (a stride-2 depthwise convolution's 3-wide window rows, judged by the tile's
one-element vector alone, took this path and ran at 0.15x onnxruntime on 576 channels of
14 x 14).
"""

from __future__ import annotations

from compiler.ir.affine import load_stride
from compiler.ir.te import Compute, Load, walk


def reduces_rows(c: Compute, vector: int, lanes: int) -> bool:
    """Whether reduction `c` (its reduce axes merged: compiler/schedule/merge_axes.py),
    with `vector` elements per vector access on a target of `lanes` SIMD lanes, is
    written as a row reduction."""
    red = c.reduce_axes
    if not c.is_reduction or not red or red[-1].extent < max(2 * vector, lanes, 2):
        return False
    inner = [a.name for a in c.axes if a.extent > 1]
    for ld in (x for x in walk(c.body) if isinstance(x, Load)):
        shape = c.inputs[ld.input].shape
        if load_stride(ld, shape, red[-1].name) == 1 and (
                not inner or load_stride(ld, shape, inner[-1]) not in (0, 1)):
            return True
    return False
