"""Element-wise kernels that read across their innermost axis: a Transpose, a copy to
channels-last, any body whose loads are strided along the output's contiguous axis.

Vectorized along that axis, every lane of such a load is a separate cache line (gcc
gathers them, or loads them one by one: a [255, 1344] transpose ran at 2.5 cycles an
element, a third of onnxruntime's speed). Where the body is contiguous along another
axis instead, the kernel computes L x L tiles as L vectors along that axis, one per
output column, turns the tile in registers (`transpose_lines`) and stores L rows: every
load and store a whole vector (compiler/codegen/c/kernel.py `_turned`). A body that
selects among inputs along that axis (a Concat's parts) runs piece by piece, each piece
specialized to its part (compiler/ir/index_split.py): YOLO's head concatenates three
maps and turns them to [positions, channels].
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.codegen.c.vector import vectorizes
from compiler.ir.affine import load_stride
from compiler.ir.index_split import specialize, split_points
from compiler.ir.te import Compute, Expr, Load, walk
from compiler.ir.zipped import zips

TURN_LANES = (4, 8, 16)  # square tiles transpose_lines turns (float32 vectors of SSE to AVX-512)


@dataclass(frozen=True)
class TurnedPiece:
    """Positions [first, end) of the turned axis and the body specialized to them
    (compiler/ir/index_split.py: a Concat's parts, each one affine load)."""

    first: int
    end: int
    body: Expr


@dataclass(frozen=True)
class Turned:
    """The axis `axis` runs as vectors, piece by piece."""

    axis: int
    pieces: tuple[TurnedPiece, ...]


def turned_axis(c: Compute, block: Sequence[int], lanes: int) -> Turned | None:
    """The axis along which element-wise `c` (tasks of `block`) runs as vectors turned
    before the store, and its pieces; None where its loads are contiguous (or constant)
    along the innermost axis already, or no other axis of at least `lanes` per task
    reads some input contiguously and, piece by piece, vectorizes the whole body."""
    n = len(c.axes)
    if lanes not in TURN_LANES or n < 2 or c.dtype != "float32" or c.is_reduction or block[-1] < lanes:
        return None
    inner = c.axes[-1].name
    if all(load_stride(ld, c.inputs[ld.input].shape, inner) in (0, 1) for ld in _loads(c.body)):
        return None
    for d in range(n - 2, -1, -1):
        if block[d] >= lanes and (pieces := _pieces(c, d, lanes)) is not None:
            return Turned(d, pieces)
    return None


def _pieces(c: Compute, d: int, lanes: int) -> tuple[TurnedPiece, ...] | None:
    """Axis `d`'s pieces, each vectorizing along it where it is a vector wide (narrower
    ones run scalar), one at least reading an input contiguously; None otherwise."""
    var, extent = c.axes[d].name, c.axes[d].extent
    env = {a.name: (0, a.extent - 1) for a in c.axes}
    cuts = [0, *split_points(c.body, var, extent), extent]
    pieces = tuple(TurnedPiece(lo, hi, specialize(c.body, {**env, var: (lo, hi - 1)}))
                   for lo, hi in itertools.pairwise(cuts))
    wide = [p for p in pieces if p.end - p.first >= lanes]
    if not wide or not all(vectorizes(p.body, var, c.inputs, c.dtype) for p in wide):
        return None
    if not any(load_stride(ld, c.inputs[ld.input].shape, var) == 1 for p in wide for ld in _loads(p.body)):
        return None
    return pieces


def _loads(e: Expr) -> list[Load]:
    return [x for x in walk(e) if isinstance(x, Load)]


@dataclass(frozen=True)
class Zipped:
    """An innermost axis of `len(bodies)` positions (a power of two below the lanes), the
    body specialized to each; axis `axis`, the next outer one, runs as vectors."""

    axis: int
    bodies: tuple[Expr, ...]


def zipped_axis(c: Compute, block: Sequence[int], lanes: int) -> Zipped | None:
    """Where element-wise `c`'s innermost axis is a few positions (2 or 4: a stride-2
    ConvTranspose's phases, split off its output axes; a nearest-neighbour upsampling's
    repeats of each column, which read the same value at every position) each computed as
    vectors along the next axis and interleaved (`interleave_lines`) into whole output
    vectors; else None."""
    n = len(c.axes)
    if lanes not in TURN_LANES or n < 2 or c.is_reduction:
        return None
    width, var = c.axes[-1].extent, c.axes[-2].name
    if not zips(c.dtype, width) or width >= lanes or block[-1] != width or block[-2] < lanes:
        return None
    env = {a.name: (0, a.extent - 1) for a in c.axes}
    bodies = tuple(specialize(c.body, {**env, c.axes[-1].name: (r, r)}) for r in range(width))
    if not all(vectorizes(b, var, c.inputs, c.dtype) for b in bodies):
        return None
    if not any(load_stride(ld, c.inputs[ld.input].shape, var) == 1 for b in bodies for ld in _loads(b)):
        return None
    return Zipped(n - 2, bodies)
