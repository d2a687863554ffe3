"""C kernels for the CPU: one tiled, OpenMP-parallel function per Compute.

Loop structure (the CPU side of Roller's rTile):
- one parallel loop over output tiles of `tile.block` (static schedule; a kernel
  the plan marks `tile.serial` runs on the calling thread alone);
- inside a tile, register micro-tiles of `tile.thread`. A reduction keeps
  one accumulator per micro-tile element (`acc[]`) and runs the reduce loops
  OUTSIDE the micro-tile loops. In there the vector (innermost output) axis is
  the loop gcc vectorizes and the other axes are fully unrolled, so a vector
  loaded once serves every row and the accumulators stay in registers. Every
  size a micro-tile takes (full, remainders) gets its own copy with constant
  bounds; a micro-tile whose padded loads cannot leave their tensors (the
  interior of a convolution) gets a copy without bounds checks;
- a long first reduce axis is walked in the plan's `tile.chunk` steps over the
  whole tile, partial sums waiting in a per-tile array, so the inputs one pass
  reads stay in cache; a reduction over padded windows stages them per task over
  the plan's `tile.stage` block (c/stage.py);
- a reduction the plan marks `tile.row_reduction` (softmax / layer-norm style, where
  the innermost reduce axis is the contiguous one in memory and the innermost output
  axis is not: compiler/schedule/row_reduction.py) instead folds whole vectors along that axis into up to four named vector
  accumulators (c/vector.py; an array of partials that gcc vectorizes where the
  body has no vector form), and folds them at the end (not `omp simd
  reduction`: max / min must propagate NaN like numpy);
- element-wise bodies with an exp, tanh, erf or log run their innermost loop as
  explicit vectors with the inlined vector functions (c/vector_functions.py); others
  are `omp simd` loops.

Contractions in float32 (matmul, convolution as implicit GEMM) take the packed,
explicit-SIMD path of compiler/codegen/c/gemm.py instead, where the plan gave them a
GEMM blocking (`TileConfig.gemm`, compiler/schedule/cpu_gemm.py); per-channel
convolutions the plan lays out plane by plane or with channels in lanes (`TileConfig.plane`) take
c/plane.py's or c/lanes.py's. Every such decision
is the plan's (compiler/schedule/cpu_tile.py); this module only renders it.

Kernel ABI: `void sym(T_out* restrict out, const T0* restrict in0, ...)`
(compiler/schedule/plan.py), and `sym_team` with the same parameters, which
shares the work among the threads of an enclosing OpenMP team (c/team.py).
Identifiers are generated (`i0`, `r1`, `t17`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from compiler.codegen.c.attention import render_attention
from compiler.codegen.c.chain import render_chain
from compiler.codegen.c.gemm import render_gemm
from compiler.codegen.c.lanes import render_lanes
from compiler.codegen.c.plane import render_plane
from compiler.codegen.c.rows import render_row_group
from compiler.codegen.c.softmax import render_row_softmax
from compiler.codegen.c.stage import stage_padded_loads, write_staging
from compiler.codegen.c.team import (
    kernel_params,
    mark_used,
    shared_tasks,
    team_symbol,
    write_standalone,
)
from compiler.codegen.c.turn import Turned, TurnedPiece, Zipped, turned_axis, zipped_axis
from compiler.codegen.c.vector import (
    VECTOR_TYPE,
    VectorWriter,
    interleave_lines,
    lane_rotations,
    splat,
    transpose_lines,
    vector_typedefs,
    vectorizes,
)
from compiler.codegen.c.vector_functions import VECTOR_FUNCTIONS
from compiler.codegen.c.workarounds import apply_workarounds, has_padded_loads
from compiler.codegen.cexpr import (
    PRELUDE,
    ExprWriter,
    combine,
    flat_offset,
    literal,
    new_counter,
    round_value,
    stored_value,
    value_ctype,
)
from compiler.codegen.csource import CSource
from compiler.ir.affine import LinearForm, form_bounds, linear_form
from compiler.ir.attention import match_attention
from compiler.ir.contraction import expr_vars
from compiler.ir.dtypes import dtype
from compiler.ir.index_split import specialize, split_points
from compiler.ir.te import ACC, INIT, Call, Compute, Expr, Load, substitute, walk
from compiler.schedule.lane_conv import LaneConv
from compiler.schedule.merge_axes import merge_axes, merge_reduce_axes
from compiler.schedule.per_channel import PerChannel
from compiler.schedule.plan import TileConfig
from compiler.schedule.row_softmax import is_row_softmax
from compiler.schedule.staging import StagedInput
from compiler.target.base import Target
from compiler.target.cpu import detect_cpu

MAX_UNROLLED_ROWS = 32
MAX_PIECES = 64  # ranges of an axis run as specialized loops at most (`_pieces`)
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def render_kernel(compute: Compute, tile: TileConfig, symbol: str, target: Target | None = None) -> str:
    """The complete C translation unit of one kernel named `symbol`, for `target`'s ISA
    (default: the build machine's, which gcc's default `-march=native` also targets),
    with the toolchain workarounds it needs (compiler/codegen/c/workarounds.py).

    A contraction whose `tile.gemm` holds a blocking (the plan's: compiler/schedule/cpu_gemm.py)
    takes the packed GEMM path; the unit then also defines the packing functions of the
    operands that blocking packs at load (compiler/schedule/prepack.py)."""
    source, checked = _render(compute, tile, symbol, target)
    return apply_workarounds(source, checked)


def _render(compute: Compute, tile: TileConfig, symbol: str, target: Target | None) -> tuple[str, bool]:
    """The translation unit, and whether its loops read padded loads with bounds checks
    (not on the packed GEMM path, nor where the windows are staged: c/stage.py)."""
    _check(compute, tile, symbol)
    src = CSource()
    src.lines.extend(PRELUDE.splitlines())
    src.line("")
    src.definitions_go_here()
    params = kernel_params(compute)
    header = f"void {team_symbol(symbol)}({', '.join(params)})"
    target = target or build_machine()
    if tile.row_softmax and not is_row_softmax(compute):
        raise ValueError(f"the plan runs {symbol} as a row softmax, which its group is not")
    if tile.attention:
        parts = match_attention(compute)
        if parts is None:
            raise ValueError(f"the plan runs {symbol} as attention, which its group is not")
        render_attention(compute, parts, tile.attention, target.lanes, src, symbol, params, header, not tile.serial)
        write_standalone(src, symbol, params, not tile.serial)
        return src.text(), False
    if compute.stages and tile.chain is not None:
        parallel, checked = render_chain(compute, tile, symbol, src, params, header, _write_member)
        write_standalone(src, symbol, params, parallel)
        return src.text(), checked
    if compute.stages and tile.row_softmax:
        parallel = not tile.serial
        render_row_softmax(compute, tile.block[-2], target.lanes, src, symbol, params, header, parallel)
        write_standalone(src, symbol, params, parallel)
        return src.text(), False
    if compute.stages:
        parallel, checked = render_row_group(compute, tile, symbol, src, params, header, _write_member)
        write_standalone(src, symbol, params, parallel)
        return src.text(), checked
    if tile.gemm is not None:
        src.line("#include <stdlib.h>")
        parallel = render_gemm(merge_axes(compute, tile)[0], tile.gemm, params, header,
                               not tile.serial, src, symbol)
        write_standalone(src, symbol, params, parallel)
        return src.text(), False
    if tile.plane is not None:
        src.line("#include <stdlib.h>")
        parallel = _render_per_channel(compute, tile.plane, params, header, not tile.serial, src, symbol)
        write_standalone(src, symbol, params, parallel)
        return src.text(), False
    parallel, checked = _write_loops(src, compute, tile, symbol, header, params, team=True, lanes=target.lanes)
    write_standalone(src, symbol, params, parallel)
    return src.text(), checked


def _render_per_channel(compute: Compute, layout: PerChannel, params: Sequence[str], header: str, parallel: bool,
                        src: CSource, symbol: str, prefix: str = "tf", team: bool = True) -> bool:
    """A per-channel convolution as its layout says: channels in lanes (c/lanes.py, any
    packing function named after `symbol`) or plane by plane (c/plane.py); whether its
    tasks are split among the team."""
    if isinstance(layout, LaneConv):
        return render_lanes(compute, layout, params, header, parallel, src, symbol, prefix, team)
    return render_plane(compute, layout, params, header, parallel, src, prefix, team)


def _write_member(src: CSource, compute: Compute, tile: TileConfig, name: str, params: Sequence[str]) -> bool:
    """A fused group's member as `static void name(params)` on the calling thread (its
    whole loop nest: the plan's member tile is one task, or its packed GEMM where the
    plan blocked it, or its planes where the plan lays it out so, helpers named after
    the member); whether it reads padded loads with bounds checks."""
    header = f"static void {name}({', '.join(params)})"
    if tile.gemm is not None:  # the caller hands in its scratch (`params` end with it)
        render_gemm(merge_axes(compute, tile)[0], tile.gemm, params, header, False, src, name, prefix=name,
                    team=False)
        return False
    if tile.plane is not None:  # likewise its plane copies
        _render_per_channel(compute, tile.plane, params, header, False, src, name, prefix=name, team=False)
        return False
    return _write_loops(src, compute, tile, name, header, params, team=False)[1]


def _write_loops(src: CSource, compute: Compute, tile: TileConfig, symbol: str, header: str,
                 params: Sequence[str], team: bool, lanes: int = 0) -> tuple[bool, bool]:
    """Function `header` running `compute`'s loop nest, its tasks shared by the team or
    (without `team`) all run by the caller; (tasks split, padded loads bounds-checked).
    `lanes`: the target's vector width, where a narrow innermost axis is zipped, or merged
    into a wide one (0: the tile's own)."""
    with src.block(header):
        mark_used(src, params)
        if math.prod(compute.shape) == 0:
            return False, False
        # neighbouring axes every tensor walks as one run merge (an element-wise kernel over
        # a 7 x 7 map then runs vectors over the whole tensor, not scalars over rows of 7:
        # the tile's vector was chosen for the narrow axis, the target's then applies)
        inner = compute.axes[-1].extent if compute.axes else 0
        compute, tile = merge_reduce_axes(compute, tile) if compute.is_reduction else merge_axes(compute, tile)
        widened = bool(compute.axes) and inner < lanes <= compute.axes[-1].extent
        writer = _KernelWriter(compute, _check(compute, tile, symbol), src, lanes, widened)
        return writer.write(team), has_padded_loads(writer.c)


@functools.cache
def build_machine() -> Target:
    """This machine's CPU target (detected once per process)."""
    return detect_cpu()


def _check(compute: Compute, tile: TileConfig, symbol: str) -> _Shape:
    if not _SYMBOL.fullmatch(symbol):
        raise ValueError(f"kernel symbol {symbol!r} is not a C identifier")
    n, m = len(compute.axes), len(compute.reduce_axes)
    if len(tile.block) != n or len(tile.thread) != n or len(tile.reduce_step) != m:
        raise ValueError(f"tile {tile} does not fit {n} spatial and {m} reduce axes")
    for dt in (compute.dtype, *(t.dtype for t in compute.inputs)):
        dtype(dt)
    ext = [a.extent for a in compute.axes]
    block = [max(1, min(b, e)) for b, e in zip(tile.block, ext, strict=True)]
    thread = [max(1, min(u, b)) for u, b in zip(tile.thread, block, strict=True)]
    if tile.stage and len(tile.stage) != n:
        raise ValueError(f"tile {tile} stages a block that does not fit {n} spatial axes")
    if tile.row_reduction and not compute.is_reduction:
        raise ValueError(f"the plan runs {symbol} as a row reduction, which it is not")
    return _Shape(ext, block, thread, max(1, tile.vector), tile.chunk, list(tile.stage), not tile.serial,
                  tile.row_reduction)


@dataclass(frozen=True)
class _Shape:
    extents: list[int]
    block: list[int]
    thread: list[int]
    vector: int
    chunk: int  # steps of the first reduce axis per pass over the tile (0: all at once)
    stage: list[int]  # the task block staging the padded windows ([]: none staged)
    parallel: bool  # the tasks are shared among the team (else the calling thread runs them)
    row: bool  # a row reduction: each output folds its contiguous row (else micro-tiles)


@dataclass(frozen=True)
class _InteriorRow:
    """Where an element-wise row's padded loads read inside their tensors (`_interior_row`)."""

    checks: tuple[str, ...]  # C conditions on the outer indices
    lo: int  # the innermost index's range [lo, hi]
    hi: int
    body: Expr  # the body with its padded loads unpadded


class _KernelWriter:
    """Writes the loop nest of one non-empty kernel into `src`."""

    def __init__(self, compute: Compute, shape: _Shape, src: CSource, lanes: int = 0, widened: bool = False) -> None:
        self.c = compute
        self.lanes = lanes or shape.vector  # the target's, for axes narrower than the tile's vector
        # the element-wise rows' vector: the tile's, or the target's where merging widened a row
        # narrower than a vector (the tile's was chosen for it) to a vector or more
        self.row_lanes = max(shape.vector, self.lanes) if widened else shape.vector
        self.s = shape
        self.src = src
        self.n = len(compute.axes)
        self.counter = new_counter()
        self.names = {a.name: f"i{d}" for d, a in enumerate(compute.axes)}
        self.names.update({a.name: f"r{k}" for k, a in enumerate(compute.reduce_axes)})
        self.ranges = {a.name: (0, a.extent - 1) for a in compute.all_axes()}
        self._row = shape.row
        self._post_lanes = 0  # lanes of the vector epilogue of the row reduction being written
        # Micro-tiled reductions over padded windows read them from per-task scratch.
        self.original = compute
        self.staged: list[StagedInput] = []
        if compute.is_reduction and not self._row and shape.stage:
            self.s = replace(shape, block=shape.stage)
            self.c, self.staged = stage_padded_loads(compute, self.s.block)
            self.names.update({s.origin(d): s.origin(d) for s in self.staged for d in range(len(s.shape))})

    # -- structure -----------------------------------------------------------------

    def write(self, team: bool = True) -> bool:
        """Write the task loop, shared by the team (c/team.py) or, without `team`, all run
        by the calling thread; whether it is split among the team."""
        tiles = [-(-e // b) for e, b in zip(self.s.extents, self.s.block, strict=True)]
        total = math.prod(tiles)
        parallel = team and total > 1 and self.s.parallel
        tasks = shared_tasks(self.src, parallel) if team else contextlib.nullcontext()
        with tasks, self.src.block(f"for (int64_t t = 0; t < {total}L; ++t)"):
            if self.n:
                self.src.line("int64_t q = t;")
            for d in reversed(range(self.n)):
                step = f"(q % {tiles[d]}L)" if d else "q"
                self.src.line(f"const int64_t b{d} = {step} * {self.s.block[d]}L;")
                if d:
                    self.src.line(f"q /= {tiles[d]}L;")
                e, b = self.s.extents[d], self.s.block[d]
                self.src.line(f"const int64_t e{d} = {e}L - b{d} < {b}L ? {e}L - b{d} : {b}L;")
            if not self.c.is_reduction:
                self._elementwise()
            elif self._row:
                self._row_reduction()
            else:
                for staged in self.staged:
                    write_staging(self.src, staged, self.original)
                self._micro_tiles()
        return parallel

    def _loop(self, var: str, bound: str, pragma: str = "", start: str = "0") -> AbstractContextManager[None]:
        if pragma:
            self.src.line(pragma)
        return self.src.block(f"for (int64_t {var} = {start}; {var} < {bound}; ++{var})")

    def _out_offset(self) -> str:
        """The output element at the current indices `i0`, `i1`, ..."""
        return flat_offset(self.c.shape, [f"i{d}" for d in range(self.n)])

    def _store(self, value: str) -> None:
        self.src.line(f"out[{self._out_offset()}] = {stored_value(self.c.dtype, value)};")

    def _emit(self, e: Expr, names: dict[str, str] | None = None) -> str:
        w = ExprWriter(self.c.inputs, names or self.names, self.counter, self.ranges)
        value = w.emit(e)
        self.src.extend(w.lines)
        return value

    # -- element-wise -----------------------------------------------------------------

    def _elementwise(self) -> None:
        turned = turned_axis(self.c, self.s.block, self.s.vector)
        if turned is not None:
            self._turned(turned, self.s.vector)
            return
        zipped = zipped_axis(self.c, self.s.block, self.lanes)
        if zipped is not None:
            self._zipped(zipped, self.lanes)
            return
        lanes = self._elementwise_lanes()
        if lanes:
            self.src.extend(vector_typedefs(self.c.dtype, lanes))

        def nest(d: int, body: Expr) -> None:
            if d == self.n:
                self._store(self._emit(body))
                return
            innermost = d == self.n - 1
            if innermost and lanes:
                self._vector_row(d, lanes, body)
                return
            pragma = "#pragma omp simd" if innermost else ""
            interior = self._interior_row(body) if innermost else None
            if interior is None and (pieces := self._pieces(d, body)):
                for first, end, piece in pieces:
                    start, stop = self._in_task(d, first, end)
                    with self._loop(f"u{d}", stop, pragma, start=start):
                        self.src.line(f"const int64_t i{d} = b{d} + u{d};")
                        nest(d + 1, piece)
                return
            if interior is not None:
                self._split_row(body, interior)
                return
            with self._loop(f"u{d}", f"e{d}", pragma):
                self.src.line(f"const int64_t i{d} = b{d} + u{d};")
                nest(d + 1, body)
        nest(0, self.c.body)

    def _interior_row(self, body: Expr) -> _InteriorRow | None:
        """Where element-wise `body`'s padded loads stay inside their tensors along the
        innermost axis: the row's checks (on the outer indices alone), the range [lo, hi]
        of the innermost index (`_interior_range`), and the body with those loads
        unpadded; None where there is no padded load or no such range."""
        x = self.n - 1
        loads = [ld for ld in walk(body) if isinstance(ld, Load) and ld.pad is not None]
        interior = self._interior_range(x, body, across=True)
        if not loads or interior is None:
            return None
        checks = []
        for ld in loads:
            for index, n in zip(ld.indices, self.c.inputs[ld.input].shape, strict=True):
                form = linear_form(index)
                assert form is not None  # `_interior_range` found every padded index affine
                if self.c.axes[x].name in form[1]:
                    continue
                low, high = form_bounds(form, self.ranges)
                if low < 0 or high >= n:
                    at = " + ".join([str(form[0]), *(f"{k} * {self.names[v]}" for v, k in form[1].items())])
                    checks.append(f"(uint64_t)({at}) < {n}UL")
        unpadded = substitute(body, lambda e: Load(e.input, e.indices, e.dtype)
                              if isinstance(e, Load) and e.pad is not None else None)
        return _InteriorRow(tuple(dict.fromkeys(checks)), *interior, unpadded)

    def _split_row(self, body: Expr, interior: _InteriorRow) -> None:
        """The innermost loop of an element-wise body with padded loads: where the row's
        checks hold, the interior [lo, hi] runs the body unchecked (it vectorizes without
        the if-conversion c/workarounds.py turns off) and only the edges checked; Winograd's
        input transform, 4 padded loads an element, took 309 us checked throughout."""
        x = self.n - 1

        def row(first: str, end: str, e: Expr) -> None:
            with self._loop(f"u{x}", end, "#pragma omp simd", start=first):
                self.src.line(f"const int64_t i{x} = b{x} + u{x};")
                self._store(self._emit(e))
        lo, hi = self._in_task(x, interior.lo, interior.hi + 1)
        with self.src.block(f"if ({' && '.join(interior.checks) or '1'})"):
            self.src.line(f"const int64_t lo{x} = {lo} < e{x} ? {lo} : e{x}, hi{x} = {hi} > lo{x} ? {hi} : lo{x};")
            row("0", f"lo{x}", body)
            row(f"lo{x}", f"hi{x}", interior.body)
            row(f"hi{x}", f"e{x}", body)
        with self.src.block("else"):
            row("0", f"e{x}", body)

    def _pieces(self, d: int, body: Expr) -> list[tuple[int, int, Expr]]:
        """Axis `d`'s ranges over which `body`'s comparisons of its index are decided, each
        with the body specialized to it (compiler/ir/index_split.py), or none where there is
        one range or too many. A select by an outer axis' index (Winograd's input transform
        picks one signed sum of its 16 per table position) would otherwise evaluate every
        branch of the chain for every element: 4.2 ms against 0.37 for the dense table's
        contraction it replaced. Along the innermost axis each piece is an affine loop gcc
        vectorizes with plain loads, where the select's clamped indices made it gather: a
        rotary embedding's half rotation (a Concat of the negated upper and the lower half
        of each head), Llama's query scaled as well, 47 us at 30% of its memory bound."""
        axis = self.c.axes[d]
        cuts = split_points(body, axis.name, axis.extent)
        if not cuts or len(cuts) >= MAX_PIECES:
            return []
        return [(lo, hi, specialize(body, {**self.ranges, axis.name: (lo, hi - 1)}))
                for lo, hi in itertools.pairwise([0, *cuts, axis.extent])]

    def _in_task(self, d: int, first: int, end: int) -> tuple[str, str]:
        """C bounds of `u<d>` over the positions [first, end) of axis `d` that lie in the
        task's block (an empty range where none do)."""
        return (f"(b{d} < {first}L ? {first}L - b{d} : 0)",
                f"({end}L - b{d} < e{d} ? {end}L - b{d} : e{d})")

    def _turned(self, turned: Turned, lanes: int) -> None:
        """The element-wise nest with axis `d` in vectors and the innermost axis `x` in
        `lanes`-wide steps (c/turn.py), piece by piece along `d`: each `lanes` x `lanes`
        tile computed as one vector along `d` per column, turned in registers, stored as
        rows, the last square of a row overlapping the one before it; the rows past the last
        whole square along `d`, and rows narrower than a vector, run scalar."""
        d, x = turned.axis, self.n - 1
        self.src.extend(vector_typedefs(self.c.dtype, lanes))
        columns = [f"col{j}" for j in range(lanes)]

        def at(indices: dict[int, str]) -> str:
            return flat_offset(self.c.shape, [indices.get(k, f"i{k}") for k in range(self.n)])

        def scalar_rows(body: Expr, first: str, end: str) -> None:
            with self._loop(f"v{d}", end, start=first):
                self.src.line(f"const int64_t i{d} = b{d} + v{d};")
                self._store(self._emit(body))

        def squares(body: Expr) -> None:
            self.src.line(f"const int64_t i{d} = b{d} + u{d};")
            self._task_loops(range(d + 1, x), lambda: square_row(body))  # the axes between d and x

        def square_row(body: Expr) -> None:
            # the last square ends at the row's end, overlapping the one before (its columns
            # computed and stored twice, alike: an output never shares bytes with an input,
            # compiler/schedule/arena.py); run scalar, YOLO's head (a Concat turned to 255
            # channels, 63 = 3 x 16 + 15 in its last task) spent most of its time on them
            with (self.src.block(f"if (e{x} >= {lanes}L)"),
                  self.src.block(f"for (int64_t s{x} = 0; s{x} < e{x}; s{x} += {lanes}L)")):
                self.src.line(f"const int64_t u{x} = s{x} + {lanes}L > e{x} ? e{x} - {lanes}L : s{x};")
                self._vectors_at(columns, [(f"b{x} + u{x} + {j}L", body) for j in range(lanes)], d, x, lanes)
                self.src.extend(transpose_lines(columns, lanes))
                for j, col in enumerate(columns):
                    self.src.line(f"*({VECTOR_TYPE}*)(out + {at({d: f'(i{d} + {j}L)', x: f'(b{x} + u{x})'})}) = {col};")
            with self.src.block("else"), self.src.block(f"for (int64_t u{x} = 0; u{x} < e{x}; ++u{x})"):
                self.src.line(f"const int64_t i{x} = b{x} + u{x};")
                scalar_rows(body, f"u{d}", f"u{d} + {lanes}L")

        def piece(p: TurnedPiece) -> None:
            """The task's positions of piece `p`: [f, g) of its rows."""
            self.src.line(f"const int64_t f{d} = {p.first}L - b{d} > 0 ? {p.first}L - b{d} : 0;")
            self.src.line(f"const int64_t g{d} = {p.end}L - b{d} < e{d} ? {p.end}L - b{d} : e{d};")
            self.src.line(f"int64_t u{d} = f{d};")
            if p.end - p.first >= lanes:
                with self.src.block(f"for (; u{d} + {lanes}L <= g{d}; u{d} += {lanes}L)"):
                    squares(p.body)
            with self.src.block(f"if (u{d} < g{d})"):
                self._task_loops(range(d + 1, x), lambda: rest_rows(p.body))

        def rest_rows(body: Expr) -> None:
            with self._loop(f"w{x}", f"e{x}"):
                self.src.line(f"const int64_t i{x} = b{x} + w{x};")
                scalar_rows(body, f"u{d}", f"g{d}")

        def pieces() -> None:
            for p in turned.pieces:
                with self.src.block(""):
                    piece(p)
        self._task_loops(range(d), pieces)

    def _task_loops(self, axes: Sequence[int], inner: Callable[[], None]) -> None:
        """`inner` inside one loop per axis of `axes` (outermost first) over the task's
        block, each declaring its index `i<d>`."""
        if not axes:
            inner()
            return
        k = axes[0]
        with self._loop(f"u{k}", f"e{k}"):
            self.src.line(f"const int64_t i{k} = b{k} + u{k};")
            self._task_loops(axes[1:], inner)

    def _vectors_at(self, names: Sequence[str], columns: Sequence[tuple[str, Expr]], d: int, x: int,
                    lanes: int) -> None:
        """Declare vectors `names`, each the value of its column's body along axis `d` with
        the innermost index `i{x}` at its column's C expression."""
        self.src.line(f"{VECTOR_TYPE} {', '.join(names)};")
        for name, (index, body) in zip(names, columns, strict=True):
            with self.src.block(""):
                self.src.line(f"const int64_t i{x} = {index};")
                w = VectorWriter(self.c.inputs, self.names, self.counter, self.c.axes[d].name, lanes)
                value = w.emit_vector(body)
                self._take(w)
                self.src.line(f"{name} = {value};")

    def _zipped(self, zipped: Zipped, lanes: int) -> None:
        """The element-wise nest with the innermost axis `x` (a few positions) unrolled and
        axis `d` in vectors (c/turn.py): each position's vector computed, the vectors
        interleaved and stored as `width` whole vectors, a partial last one as `_whole_vectors`
        does it (Winograd's output transform of a 64-channel 3x3 convolution on 16 x 56, 28
        tiles a row, ran its 12-tile tails scalar: 143 us against the 22 of a 32 x 32 map's,
        whose 16 tiles a row are one AVX-512 vector)."""
        d, x, width = zipped.axis, self.n - 1, len(zipped.bodies)
        self.src.extend(vector_typedefs(self.c.dtype, lanes))
        parts = [f"z{r}" for r in range(width)]

        def vectors_at(start: str) -> None:
            self.src.line(f"const int64_t i{d} = b{d} + {start};")
            self._vectors_at(parts, [(f"{r}L", body) for r, body in enumerate(zipped.bodies)], d, x, lanes)
            self.src.extend(interleave_lines(parts, lanes))
            at = flat_offset(self.c.shape, [*(f"i{k}" for k in range(x)), "0"])
            for r, part in enumerate(parts):
                self.src.line(f"*({VECTOR_TYPE}*)(out + {at} + {r * lanes}L) = {part};")

        def scalar_at(index: str) -> None:
            self.src.line(f"const int64_t i{d} = b{d} + {index};")
            with self._loop(f"u{x}", f"e{x}"):
                self.src.line(f"const int64_t i{x} = b{x} + u{x};")
                self._store(self._emit(self.c.body))
        self._task_loops(range(d), lambda: self._whole_vectors(d, lanes, vectors_at, scalar_at))

    def _elementwise_lanes(self) -> int:
        """Lanes of the explicit-SIMD innermost loop (c/vector.py), or 0 for the `omp simd`
        loop. Only bodies with a transcendental of c/vector_functions.py take it: gcc
        vectorizes the rest as well by itself, but calls libmvec's expf for a vector, twice
        the time of our inlined one (and its tanh, erf, log: out of line, and per ISA)."""
        c, lanes = self.c, self.row_lanes
        if lanes < 2 or not self.n or self.s.extents[-1] < lanes:
            return 0
        var = c.axes[-1].name
        has_math = any(isinstance(e, Call) and e.op in VECTOR_FUNCTIONS for e in walk(c.body))
        varies = var in expr_vars(c.body)
        return lanes if has_math and varies and vectorizes(c.body, var, c.inputs, c.dtype) else 0

    def _vector_row(self, d: int, lanes: int, e: Expr, accs: str | None = None) -> None:
        """The innermost loop of a tile's row of `e` in whole vectors: an element-wise body,
        or with `accs` (the array of the row's accumulators, read as `acc`) a row
        reduction's epilogue; a partial vector at the row's end as `_whole_vectors` does it,
        so every element gets the same math."""
        def vector_at(start: str) -> None:
            self.src.line(f"const int64_t i{d} = b{d} + {start};")
            names, values = self.names, set()
            if accs is not None:
                self.src.line(f"const {VECTOR_TYPE} va = *(const {VECTOR_TYPE}*)({accs} + {start});")
                names, values = {**self.names, ACC: "va"}, {ACC}
            w = VectorWriter(self.c.inputs, names, self.counter, self.c.axes[d].name, lanes, values)
            value = w.emit_vector(e)
            self._take(w)
            self.src.line(f"*({VECTOR_TYPE}*)(out + {self._out_offset()}) = {value};")

        def scalar_at(index: str) -> None:
            self.src.line(f"const int64_t i{d} = b{d} + {index};")
            names = self.names if accs is None else {**self.names, ACC: f"{accs}[{index}]"}
            self._store(self._emit(e, names))
        self._whole_vectors(d, lanes, vector_at, scalar_at)

    def _whole_vectors(self, d: int, lanes: int, vector_at: Callable[[str], None],
                       scalar_at: Callable[[str], None]) -> None:
        """A task's axis `d` in whole vectors of `lanes` (`vector_at` writes the one starting
        at a C offset into the task's block); a partial vector at its end recomputes the last
        whole vector instead (the same values written twice: the output never aliases an
        input), and only a block shorter than a vector runs element by element (`scalar_at`)."""
        self.src.line(f"int64_t u{d} = 0;")
        with self.src.block(f"for (; u{d} + {lanes}L <= e{d}; u{d} += {lanes}L)"):
            vector_at(f"u{d}")
        with self.src.block(f"if (u{d} < e{d} && e{d} >= {lanes}L)"):
            vector_at(f"e{d} - {lanes}L")
        with self.src.block("else"), self._loop(f"tail{d}", f"e{d}", start=f"u{d}"):
            scalar_at(f"tail{d}")

    def _take(self, w: VectorWriter) -> None:
        """Write a vector writer's statements, and the file-scope C they call."""
        self.src.extend(w.lines)
        self.src.define(w.definitions)

    # -- reductions with the output axis innermost ----------------------------------------

    def _micro_tiles(self) -> None:
        """Walk the tile in micro-tiles; each size a micro-tile can have gets its own
        copy with constant bounds (extents are static, so the sizes are known).

        Micro-tiles do not straddle the edges of the interior (where no padded load can
        leave its tensor) along any tiled axis, so most of them skip the checks.
        """
        u = self.s.thread
        tiled = [d for d in range(self.n) if u[d] > 1]
        # Cutting pays once a micro-tile row spans a whole vector: the edge micro-tiles
        # run scalar (padded-load kernels are built without if-conversion, see
        # c/workarounds.py), so a 16-wide row on a 16-wide image would otherwise never
        # reach the vectorized interior copy; cutting the rows too keeps a 4-row
        # micro-tile of a small image off the border. Measured: depthwise 3x3 144ch
        # 56x56 0.66x -> 0.94x onnxruntime. Narrower rows leave pieces too small to pay.
        wide = self.n and u[-1] >= self.s.vector
        cuts = {d: self._interior_edges(d) if wide else None for d in tiled}

        def origins(d: int) -> None:
            if d < self.n and d not in cuts:
                with self.src.block(f"for (int64_t m{d} = 0; m{d} < e{d}; m{d} += {u[d]}L)"):
                    origins(d + 1)
                return
            if d < self.n:
                with self.src.block(f"for (int64_t m{d} = 0, n{d}; m{d} < e{d}; m{d} += n{d})"):
                    limit = f"e{d}"
                    if cuts[d] is not None:
                        lo, hi = cuts[d]
                        self.src.line(f"const int64_t p{d} = b{d} + m{d};")
                        edge = f"(p{d} < {lo}L ? {lo}L : p{d} <= {hi}L ? {hi + 1}L : {self.s.extents[d]}L)"
                        self.src.line(f"const int64_t g{d} = {edge} - b{d} < e{d} ? {edge} - b{d} : e{d};")
                        limit = f"g{d}"
                    self.src.line(f"n{d} = {limit} - m{d} < {u[d]}L ? {limit} - m{d} : {u[d]}L;")
                    origins(d + 1)
                return
            variants = list(itertools.product(*(self._micro_sizes(d, cuts[d]) for d in tiled)))
            for k, sizes in enumerate(variants):
                size_of = dict(zip(tiled, sizes, strict=True))
                bounds = [size_of.get(d, 1) for d in range(self.n)]
                test = " && ".join(f"n{d} == {size_of[d]}L" for d in tiled)
                header = "" if len(variants) == 1 else (
                    f"if ({test})" if k == 0 else "else" if k == len(variants) - 1 else f"else if ({test})")
                with self.src.block(header):
                    self._interior_split(bounds)

        chunk = self.s.chunk
        if not chunk:
            origins(0)
            return
        # Reduce in chunks of the first reduce axis (Roller's reduce step): each pass
        # over the tile reads a cache-sized slab of the inputs; partial sums wait in tacc.
        extent = self.c.reduce_axes[0].extent
        self.src.line(f"{value_ctype(self.c.acc_dtype)} tacc[{math.prod(self.s.block)}];")
        with self.src.block(f"for (int64_t c0 = 0; c0 < {extent}L; c0 += {chunk}L)"):
            self.src.line(f"const int64_t c1 = c0 + {chunk}L < {extent}L ? c0 + {chunk}L : {extent}L;")
            origins(0)

    def _interior_split(self, bounds: Sequence[int]) -> None:
        """A micro-tile whose padded loads all stay inside their tensors (the bulk of a
        convolution) runs a copy of the body without bounds checks."""
        checks, unpadded = self._interior_checks(bounds)
        if not checks:
            self._micro_tile(bounds, self.c.body)
            return
        with self.src.block(f"if ({' && '.join(checks)})"):
            self._micro_tile(bounds, unpadded)
        with self.src.block("else"):
            self._micro_tile(bounds, self.c.body)

    def _interior_checks(self, bounds: Sequence[int]) -> tuple[list[str], Expr]:
        """C conditions under which the affine padded loads of the body read inside their
        tensors over this micro-tile, and the body with those loads unpadded."""
        spatial = {a.name: d for d, a in enumerate(self.c.axes)}
        checks: list[str] = []
        safe: set[int] = set()

        def extreme(form: LinearForm, high: bool) -> str:
            terms = [str(form[0])]
            for var, k in form[1].items():
                top = (k > 0) == high
                if var in spatial:
                    d = spatial[var]
                    point = f"(b{d} + m{d} + {bounds[d] - 1 if top else 0})"
                else:
                    point = str(self.ranges[var][1] if top else self.ranges[var][0])
                terms.append(f"{k} * {point}")
            return " + ".join(terms)

        for ld in (x for x in walk(self.c.body) if isinstance(x, Load) and x.pad is not None):
            shape = self.c.inputs[ld.input].shape
            forms = [linear_form(i) for i in ld.indices]
            if any(f is None or any(v not in self.ranges for v in f[1]) for f in forms):
                continue
            for form, n in zip(forms, shape, strict=True):
                static = form_bounds(form, self.ranges)
                if static[0] < 0:
                    checks.append(f"{extreme(form, False)} >= 0")
                if static[1] >= n:
                    checks.append(f"{extreme(form, True)} < {n}")
            safe.add(id(ld))

        def unpad(e: Expr) -> Expr | None:
            if isinstance(e, Load) and id(e) in safe:
                return Load(e.input, e.indices, e.dtype)
            return None
        return list(dict.fromkeys(checks)), substitute(self.c.body, unpad)

    def _micro_sizes(self, d: int, cuts: tuple[int, int] | None) -> list[int]:
        """Every size a micro-tile of axis d takes, found by walking each tile as the C does."""
        e, b, u = self.s.extents[d], self.s.block[d], self.s.thread[d]
        sizes = set()
        for start in range(0, e, b):
            extent, m = min(b, e - start), 0
            while m < extent:
                p = start + m
                edge = e if cuts is None else cuts[0] if p < cuts[0] else cuts[1] + 1 if p <= cuts[1] else e
                size = min(u, min(edge - start, extent) - m)
                sizes.add(size)
                m += size
        return sorted(sizes, reverse=True)

    def _interior_edges(self, d: int) -> tuple[int, int] | None:
        """[lo, hi] of axis d outside which some padded load may leave its tensor
        (None when there is no such edge or it cannot be found simply)."""
        interior = self._interior_range(d, self.c.body)
        return None if interior == (0, self.s.extents[d] - 1) else interior

    def _interior_range(self, d: int, body: Expr, across: bool = False) -> tuple[int, int] | None:
        """[lo, hi] of axis d inside which `body`'s padded loads cannot leave their tensors
        along it (the whole axis where none depends on it); None where there is no such
        range or it cannot be found simply (an index not affine, or mixing d with another
        output axis). With `across`, an index mixing d with other output axes is bounded
        over their whole extents: one static range for every row, narrower than some rows
        have (Winograd's input transform reads its window's column b at 4 x tile column +
        b - 1: rows of 14 tiles, 12 inside for every b against 13 for one b; bounds
        computed per row, not known to gcc, left 14-tile rows unvectorized, 2x slower)."""
        var = self.c.axes[d].name
        spatial = set() if across else {a.name for a in self.c.axes}
        lo, hi = 0, self.s.extents[d] - 1
        for ld in (x for x in walk(body) if isinstance(x, Load) and x.pad is not None):
            for index, n in zip(ld.indices, self.c.inputs[ld.input].shape, strict=True):
                form = linear_form(index)
                if form is None:
                    return None
                coef = form[1].get(var, 0)
                rest = {v: k for v, k in form[1].items() if v != var}
                if coef == 0:
                    continue
                if coef < 0 or any(v in spatial or v not in self.ranges for v in rest):
                    return None
                low, high = form_bounds((form[0], rest), self.ranges)
                lo = max(lo, -(low // coef))  # coef * x + low >= 0
                hi = min(hi, (n - 1 - high) // coef)  # coef * x + high <= n - 1
        return None if lo > hi else (lo, hi)

    def _spatial(self, order: Sequence[int], bounds: Sequence[int], inner: Callable[[], None],
                 unroll: bool = False) -> None:
        """Constant-bound loops over micro-tile axes in `order` (one-trip loops become constants).

        Every loop but the first is fully unrolled, so values that do not depend on
        an unrolled axis (the contiguous vector load a micro-tile's rows share) are
        computed once per iteration of the first loop.
        """
        if not order:
            inner()
            return
        d, rest = order[0], order[1:]
        if bounds[d] == 1:
            with self.src.block(""):
                self.src.line(f"const int64_t u{d} = 0;")
                self.src.line(f"const int64_t i{d} = b{d} + m{d} + u{d};")
                self._spatial(rest, bounds, inner, unroll)
            return
        pragma = f"#pragma GCC unroll {bounds[d]}" if unroll else ""
        with self._loop(f"u{d}", f"{bounds[d]}L", pragma):
            self.src.line(f"const int64_t i{d} = b{d} + m{d} + u{d};")
            # Beyond a register file's worth of rows, unrolling only grows the code.
            self._spatial(rest, bounds, inner, math.prod(bounds[x] for x in rest) <= MAX_UNROLLED_ROWS)

    def _micro_tile(self, bounds: Sequence[int], body: Expr) -> None:
        """One register micro-tile: init accumulators, reduce `body`, then post and store."""
        if self._vectorizes(bounds, body):
            self._vector_micro_tile(bounds, body)
            return
        c, u = self.c, self.s.thread
        size = math.prod(u)
        flat = " + ".join(f"u{d} * {math.prod(u[d + 1:])}L" for d in range(self.n) if u[d] > 1) or "0"
        acc_t = value_ctype(c.acc_dtype)
        init = literal(INIT[c.reduce_op](c.acc_dtype), c.acc_dtype)
        self.src.line(f"{acc_t} acc[{size}];")

        def accumulate() -> None:
            value = self._emit(body)
            self.src.line(f"acc[{flat}] = {combine(c.reduce_op, c.acc_dtype, f'acc[{flat}]', value)};")

        order = [self.n - 1, *range(self.n - 1)] if self.n else []
        if not self.s.chunk:
            self._spatial(order, bounds, lambda: self.src.line(f"acc[{flat}] = {init};"))
            self._reduce_loops(len(c.reduce_axes), lambda: self._spatial(order, bounds, accumulate))
            self._spatial(order, bounds, lambda: self._finish(f"acc[{flat}]"))
            return
        saved = f"tacc[{self._tile_offset()}]"
        self._spatial(order, bounds, lambda: self.src.line(f"acc[{flat}] = c0 == 0 ? {init} : {saved};"))
        self._reduce_loops(len(c.reduce_axes), lambda: self._spatial(order, bounds, accumulate))
        with self.src.block(f"if (c1 == {c.reduce_axes[0].extent}L)"):
            self._spatial(order, bounds, lambda: self._finish(f"acc[{flat}]"))
        with self.src.block("else"):
            self._spatial(order, bounds, lambda: self.src.line(f"{saved} = acc[{flat}];"))

    def _vectorizes(self, bounds: Sequence[int], body: Expr) -> bool:
        """Whether this micro-tile takes the explicit-SIMD path (c/vector.py): a sum, max or
        min whose rows hold a vector and whose body and post the vectors can express."""
        c, lanes = self.c, self.s.vector
        if not self.n or c.reduce_op not in {"sum", "max", "min"} or lanes < 2 or bounds[-1] < lanes:
            return False
        var = c.axes[-1].name
        post_ok = c.post is None or vectorizes(c.post, var, c.inputs, c.acc_dtype, {ACC})
        return (body.dtype == c.acc_dtype == c.dtype and post_ok
                and vectorizes(body, var, c.inputs, c.acc_dtype))

    def _vector_micro_tile(self, bounds: Sequence[int], body: Expr) -> None:
        """One micro-tile reduced into named vector accumulators, one per row and vector,
        which stay in registers for the whole reduction; post applied and stored as vectors.
        A row that is not a whole number of vectors ends with a vector overlapping the one
        before it (its shared lanes computed twice, stored twice with the same values):
        a 56-wide row takes four 16-lane vectors instead of seven of 8 lanes."""
        c, lanes, last = self.c, self.s.vector, self.n - 1
        var = c.axes[last].name
        self.src.extend(vector_typedefs(c.acc_dtype, lanes))
        rows = itertools.product(*(range(bounds[d]) for d in range(last)))
        starts = [*range(0, bounds[last] - lanes + 1, lanes)]
        if bounds[last] % lanes:
            starts.append(bounds[last] - lanes)
        slots = [(*row, j) for row in rows for j in starts]
        acc = {s: f"v{k}" for k, s in enumerate(slots)}

        def at(slot: Sequence[int]) -> None:  # the slot's indices (its first lane's)
            self.src.extend([f"const int64_t i{d} = b{d} + m{d} + {p};" for d, p in enumerate(slot)])

        def saved(slot: Sequence[int]) -> str:  # its place among the tile's partial sums
            terms = [f"(m{d} + {p}) * {math.prod(self.s.block[d + 1:])}L"
                     for d, p in enumerate(slot) if self.s.block[d] > 1]
            return f"*({VECTOR_TYPE}*)(tacc + {' + '.join(terms) or '0'})"

        start = splat(literal(INIT[c.reduce_op](c.acc_dtype), c.acc_dtype), lanes)
        for s in slots:
            init = f"c0 == 0 ? {start} : {saved(s)}" if self.s.chunk else start
            self.src.line(f"{VECTOR_TYPE} {acc[s]} = {init};")

        def per_slot(write: Callable[[tuple[int, ...], VectorWriter], None],
                     names: Callable[[tuple[int, ...]], dict[str, str]] = lambda s: self.names) -> None:
            for s in slots:
                with self.src.block(""):
                    at(s)
                    w = VectorWriter(c.inputs, names(s), self.counter, var, lanes, {ACC})
                    write(s, w)

        def accumulate(s: tuple[int, ...], w: VectorWriter) -> None:
            folded = w.fold(c.reduce_op, acc[s], w.emit_vector(body))
            self._take(w)
            self.src.line(f"{acc[s]} = {folded};")

        def finish(s: tuple[int, ...], w: VectorWriter) -> None:
            value = acc[s] if c.post is None else w.emit_vector(c.post)
            self._take(w)
            self.src.line(f"*({VECTOR_TYPE}*)(out + {self._out_offset()}) = {value};")

        def post_names(s: tuple[int, ...]) -> dict[str, str]:
            return {**self.names, ACC: acc[s]}

        self._reduce_loops(len(c.reduce_axes), lambda: per_slot(accumulate))
        if not self.s.chunk:
            per_slot(finish, post_names)
            return
        with self.src.block(f"if (c1 == {c.reduce_axes[0].extent}L)"):
            per_slot(finish, post_names)
        with self.src.block("else"):
            self.src.extend([f"{saved(s)} = {acc[s]};" for s in slots])

    def _tile_offset(self) -> str:
        """Position of the current micro-tile element in the row-major tile (tacc)."""
        terms = [f"(m{d} + u{d}) * {math.prod(self.s.block[d + 1:])}L"
                 for d in range(self.n) if self.s.block[d] > 1]
        return " + ".join(terms) or "0"

    def _reduce_loops(self, count: int, inner: Callable[[], None], k: int = 0) -> None:
        """Loops over the first `count` reduce axes around `inner` (the first one over
        the current chunk when the micro-tiles reduce in chunks)."""
        if k == count:
            inner()
            return
        if k == 0 and self.s.chunk and self.c.is_reduction and not self._row:
            loop = self._loop("r0", "c1", start="c0")
        else:
            loop = self._loop(f"r{k}", f"{self.c.reduce_axes[k].extent}L")
        with loop:
            self._reduce_loops(count, inner, k + 1)

    def _finish(self, acc: str) -> None:
        """Apply the post expression to accumulator value `acc` and store it (in a row
        reduction with a vector epilogue, keep it in the row's array for the epilogue)."""
        value = round_value(self.c.acc_dtype, acc)
        if self._post_lanes:
            self.src.line(f"row[u{self.n - 1}] = {value};")
            return
        if self.c.post is not None:
            value = self._emit(self.c.post, {**self.names, ACC: value})
        self._store(value)

    # -- row reductions (innermost reduce axis contiguous) --------------------------------

    def _row_reduction(self) -> None:
        if self._row_vectorizes():
            self._vector_row_reduction()
            return
        # Two vectors of partials: one would serialize every add on its latency.
        c, v = self.c, 2 * self.s.vector
        last = len(c.reduce_axes) - 1
        extent = c.reduce_axes[-1].extent
        acc_t = value_ctype(c.acc_dtype)
        init = literal(INIT[c.reduce_op](c.acc_dtype), c.acc_dtype)

        def fold(slot: str) -> None:
            value = self._emit(c.body)
            self.src.line(f"part[{slot}] = {combine(c.reduce_op, c.acc_dtype, f'part[{slot}]', value)};")

        def reduce_row() -> None:
            self.src.line("int64_t rl = 0;")
            with (self.src.block(f"for (; rl + {v}L <= {extent}L; rl += {v}L)"),
                  self._loop("v", f"{v}L", "#pragma omp simd")):
                self.src.line(f"const int64_t r{last} = rl + v;")
                fold("v")
            with self.src.block(f"for (; rl < {extent}L; ++rl)"):
                self.src.line(f"const int64_t r{last} = rl;")
                fold("0")

        def per_row() -> None:
            self.src.line(f"{acc_t} part[{v}];")
            with self._loop("v", f"{v}L"):
                self.src.line(f"part[v] = {init};")
            self._reduce_loops(last, reduce_row)
            self.src.line(f"{acc_t} acc = part[0];")
            with self._loop("v", f"{v}L", start="1"):
                self.src.line(f"acc = {combine(c.reduce_op, c.acc_dtype, 'acc', 'part[v]')};")
            self._finish("acc")
        self._rows(per_row)

    def _rows(self, per_row: Callable[[], None]) -> None:
        """`per_row` inside the loops over the tile's output elements; an epilogue with a
        transcendental then runs on vectors over each innermost row of accumulators."""
        lanes = self._post_lanes = self._epilogue_lanes()

        def nest(d: int) -> None:
            if d == self.n:
                per_row()
                return
            if d == self.n - 1 and lanes:
                self.src.extend(vector_typedefs(self.c.acc_dtype, lanes))
                self.src.line(f"{value_ctype(self.c.acc_dtype)} row[{self.s.block[d]}] __attribute__((aligned(64)));")
            with self._loop(f"u{d}", f"e{d}"):
                self.src.line(f"const int64_t i{d} = b{d} + u{d};")
                nest(d + 1)
            if d == self.n - 1 and lanes:
                assert self.c.post is not None
                self._vector_row(d, lanes, self.c.post, "row")
        nest(0)
        self._post_lanes = 0

    def _epilogue_lanes(self) -> int:
        """Lanes of a row reduction's vector epilogue (c/vector.py), or 0 for the scalar one
        per output: only epilogues with a transcendental of c/vector_functions.py take it
        (libm's scalar erff per output cost twice the whole row-dot GEMM it followed)."""
        c, lanes = self.c, self.s.vector
        if c.post is None or lanes < 2 or not self.n or self.s.extents[-1] < lanes or c.acc_dtype != c.dtype:
            return 0
        var = c.axes[-1].name
        has_math = any(isinstance(e, Call) and e.op in VECTOR_FUNCTIONS for e in walk(c.post))
        return lanes if has_math and vectorizes(c.post, var, c.inputs, c.dtype, {ACC}) else 0

    def _row_vectorizes(self) -> bool:
        """Whether a row reduction folds whole vectors along its contiguous axis (c/vector.py)."""
        c = self.c
        var = c.reduce_axes[-1].name
        return (self.s.vector >= 2 and c.body.dtype == c.acc_dtype
                and var in expr_vars(c.body) and vectorizes(c.body, var, c.inputs, c.acc_dtype))

    def _vector_row_reduction(self) -> None:
        """Each row folded into named vector accumulators, which stay in registers (the
        array of partials that gcc vectorizes goes through memory at every step)."""
        c, lanes = self.c, self.s.vector
        last, extent = len(c.reduce_axes) - 1, c.reduce_axes[-1].extent
        count = min(4, extent // lanes)  # independent chains: a fold waits on its latency
        acc_t = value_ctype(c.acc_dtype)
        init = literal(INIT[c.reduce_op](c.acc_dtype), c.acc_dtype)
        parts = [f"p{k}" for k in range(count)]
        self.src.extend(vector_typedefs(c.acc_dtype, lanes))

        def writer() -> VectorWriter:
            return VectorWriter(c.inputs, self.names, self.counter, c.reduce_axes[-1].name, lanes)

        def reduce_row() -> None:
            self.src.line("int64_t rl = 0;")
            with self.src.block(f"for (; rl + {count * lanes}L <= {extent}L; rl += {count * lanes}L)"):
                for k, part in enumerate(parts):
                    with self.src.block(""):
                        self.src.line(f"const int64_t r{last} = rl + {k * lanes}L;")
                        w = writer()
                        value = w.fold(c.reduce_op, part, w.emit_vector(c.body))
                        self._take(w)
                        self.src.line(f"{part} = {value};")
            with self.src.block(f"for (; rl < {extent}L; ++rl)"):
                self.src.line(f"const int64_t r{last} = rl;")
                self.src.line(f"rest = {combine(c.reduce_op, c.acc_dtype, 'rest', self._emit(c.body))};")

        def per_row() -> None:
            self.src.extend([f"{VECTOR_TYPE} {part} = {splat(init, lanes)};" for part in parts])
            self.src.line(f"{acc_t} rest = {init};")
            self._reduce_loops(last, reduce_row)
            w = writer()
            whole = functools.reduce(lambda a, b: w.fold(c.reduce_op, a, b), parts)
            self._take(w)
            self.src.line(f"{VECTOR_TYPE} lanes = {whole};")
            for rotated in lane_rotations("lanes", lanes):  # the lanes folded as a tree
                w = writer()
                folded = w.fold(c.reduce_op, "lanes", rotated)
                self._take(w)
                self.src.line(f"lanes = {folded};")
            self.src.line(f"const {acc_t} acc = {combine(c.reduce_op, c.acc_dtype, 'rest', 'lanes[0]')};")
            self._finish("acc")
        self._rows(per_row)
