"""C kernels for the CPU: one tiled, OpenMP-parallel function per Compute.

Loop structure (the CPU side of Roller's rTile):
- one parallel loop over output tiles of `tile.block` (static schedule; small
  kernels run serially, thread start-up would cost more than they do);
- inside a tile, register micro-tiles of `tile.thread`. A reduction keeps
  one accumulator per micro-tile element (`acc[]`, which gcc keeps in
  registers when the micro-tile is full and its loops have constant bounds)
  and runs the reduce loops OUTSIDE the spatial micro loops, so the innermost
  loop walks the contiguous output axis and vectorizes.
  Remainder micro-tiles take a copy of the same code with clamped bounds;
- a row reduction (softmax / layer-norm style, where the innermost reduce axis
  is the contiguous one in memory and the innermost output axis is not)
  instead reduces into `tile.vector` partial accumulators along that axis,
  vectorized, and folds them at the end.

Kernel ABI: `void sym(T_out* restrict out, const T0* restrict in0, ...)`
(compiler/schedule/plan.py). Identifiers are generated (`i0`, `r1`, `t17`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from compiler.codegen.cexpr import (
    PRELUDE,
    ExprWriter,
    affine_coefficient,
    combine,
    literal,
    new_counter,
    row_major_strides,
    value_ctype,
)
from compiler.codegen.csource import CSource
from compiler.ir.dtypes import dtype
from compiler.ir.te import ACC, INIT, Compute, Expr, Load, walk
from compiler.schedule.plan import TileConfig

# Below this many scalar ops a kernel runs on the calling thread alone.
PARALLEL_MIN_FLOPS = 1 << 17
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def render_kernel(compute: Compute, tile: TileConfig, symbol: str) -> str:
    """The complete C translation unit of one kernel named `symbol`."""
    shape = _check(compute, tile, symbol)
    src = CSource()
    src.lines.extend(PRELUDE.splitlines())
    src.line("")
    params = [f"{_storage_ctype(compute.dtype)}* restrict out"] + [
        f"const {_storage_ctype(t.dtype)}* restrict in{k}" for k, t in enumerate(compute.inputs)]
    with src.block(f"void {symbol}({', '.join(params)})"):
        src.extend([f"(void){p.rsplit(' ', 1)[1]};" for p in params])
        if math.prod(compute.shape) > 0:
            _KernelWriter(compute, shape, src).write()
    return src.text()


def _storage_ctype(dt: str) -> str:
    return dtype(dt).c_type


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
    return _Shape(ext, block, thread, max(1, tile.vector))


@dataclass(frozen=True)
class _Shape:
    extents: list[int]
    block: list[int]
    thread: list[int]
    vector: int


class _KernelWriter:
    """Writes the loop nest of one non-empty kernel into `src`."""

    def __init__(self, compute: Compute, shape: _Shape, src: CSource) -> None:
        self.c = compute
        self.s = shape
        self.src = src
        self.n = len(compute.axes)
        self.counter = new_counter()
        self.out_strides = row_major_strides(compute.shape)
        self.names = {a.name: f"i{d}" for d, a in enumerate(compute.axes)}
        self.names.update({a.name: f"r{k}" for k, a in enumerate(compute.reduce_axes)})

    # -- structure -----------------------------------------------------------------

    def write(self) -> None:
        tiles = [-(-e // b) for e, b in zip(self.s.extents, self.s.block, strict=True)]
        total = math.prod(tiles)
        if total > 1 and self.c.flops() >= PARALLEL_MIN_FLOPS:
            self.src.line("#pragma omp parallel for schedule(static)")
        with self.src.block(f"for (int64_t t = 0; t < {total}L; ++t)"):
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
            elif self._is_row_reduction():
                self._row_reduction()
            else:
                self._micro_tiles()

    def _loop(self, var: str, bound: str, pragma: str = "", start: str = "0") -> AbstractContextManager[None]:
        if pragma:
            self.src.line(pragma)
        return self.src.block(f"for (int64_t {var} = {start}; {var} < {bound}; ++{var})")

    def _store(self, value: str) -> None:
        terms = [f"i{d}" if s == 1 else f"i{d} * {s}L" for d, s in enumerate(self.out_strides)
                 if self.s.extents[d] != 1]
        self.src.line(f"out[{' + '.join(terms) or '0'}] = {value};")

    def _emit(self, e: Expr, names: dict[str, str] | None = None) -> str:
        w = ExprWriter(self.c.inputs, names or self.names, self.counter)
        value = w.emit(e)
        self.src.extend(w.lines)
        return value

    # -- element-wise -----------------------------------------------------------------

    def _elementwise(self) -> None:
        def nest(d: int) -> None:
            if d == self.n:
                self._store(self._emit(self.c.body))
                return
            with self._loop(f"u{d}", f"e{d}", "#pragma omp simd" if d == self.n - 1 else ""):
                self.src.line(f"const int64_t i{d} = b{d} + u{d};")
                nest(d + 1)
        nest(0)

    # -- reductions with the output axis innermost ----------------------------------------

    def _micro_tiles(self) -> None:
        u = self.s.thread
        tiled = [d for d in range(self.n) if u[d] > 1]

        def origins(d: int) -> None:
            if d < self.n:
                with self.src.block(f"for (int64_t m{d} = 0; m{d} < e{d}; m{d} += {u[d]}L)"):
                    origins(d + 1)
                return
            if not tiled:
                self._micro_tile([f"{x}L" for x in u], unroll=True)
                return
            full = " && ".join(f"e{d} - m{d} >= {u[d]}L" for d in tiled)
            with self.src.block(f"if ({full})"):
                self._micro_tile([f"{x}L" for x in u], unroll=True)
            with self.src.block("else"):
                for d in tiled:
                    self.src.line(f"const int64_t n{d} = e{d} - m{d} < {u[d]}L ? e{d} - m{d} : {u[d]}L;")
                self._micro_tile([f"n{d}" if d in tiled else "1L" for d in range(self.n)], unroll=False)
        origins(0)

    def _micro_tile(self, bounds: Sequence[str], unroll: bool) -> None:
        """One register micro-tile: init accumulators, reduce, then post and store."""
        c, u = self.c, self.s.thread
        size = math.prod(u)
        flat = " + ".join(f"u{d} * {math.prod(u[d + 1:])}L" for d in range(self.n) if u[d] > 1) or "0"
        acc_t = value_ctype(c.acc_dtype)
        self.src.line(f"{acc_t} acc[{size}];")
        with self._loop("k", f"{size}L"):
            self.src.line(f"acc[k] = {literal(INIT[c.reduce_op](c.acc_dtype), c.acc_dtype)};")

        def spatial(d: int, inner: Callable[[], None]) -> None:
            if d == self.n:
                inner()
                return
            # No `omp simd` here: it turns acc[] into per-lane arrays that gcc then
            # keeps in memory; plain auto-vectorization keeps them in registers.
            pragma = f"#pragma GCC unroll {u[d]}" if unroll and u[d] > 1 and d < self.n - 1 else ""
            with self._loop(f"u{d}", bounds[d], pragma):
                self.src.line(f"const int64_t i{d} = b{d} + m{d} + u{d};")
                spatial(d + 1, inner)

        def accumulate() -> None:
            value = self._emit(c.body)
            self.src.line(f"acc[{flat}] = {combine(c.reduce_op, c.acc_dtype, f'acc[{flat}]', value)};")

        self._reduce_loops(len(c.reduce_axes), lambda: spatial(0, accumulate))
        spatial(0, lambda: self._finish(f"acc[{flat}]"))

    def _reduce_loops(self, count: int, inner: Callable[[], None], k: int = 0) -> None:
        """Loops over the first `count` reduce axes around `inner`."""
        if k == count:
            inner()
            return
        with self._loop(f"r{k}", f"{self.c.reduce_axes[k].extent}L"):
            self._reduce_loops(count, inner, k + 1)

    def _finish(self, acc: str) -> None:
        """Apply the post expression to accumulator value `acc` and store it."""
        value = acc
        if self.c.acc_dtype == "float16":
            value = f"(float)(_Float16){acc}"
        if self.c.post is not None:
            value = self._emit(self.c.post, {**self.names, ACC: value})
        self._store(value)

    # -- row reductions (innermost reduce axis contiguous) --------------------------------

    def _is_row_reduction(self) -> bool:
        """True when the last reduce axis walks memory contiguously and the output axis does not."""
        red = self.c.reduce_axes
        if not red or red[-1].extent < 2 * self.s.vector:
            return False
        inner = [a.name for a in self.c.axes if a.extent > 1]
        for ld in (x for x in walk(self.c.body) if isinstance(x, Load)):
            strides = row_major_strides(self.c.inputs[ld.input].shape)

            def stride(var: str, ld: Load = ld, strides: list[int] = strides) -> int | None:
                coefs = [affine_coefficient(i, var) for i in ld.indices]
                if None in coefs:
                    return None
                return sum(c * s for c, s in zip(coefs, strides, strict=True))  # type: ignore[misc]

            if stride(red[-1].name) == 1 and (not inner or stride(inner[-1]) not in (0, 1)):
                return True
        return False

    def _row_reduction(self) -> None:
        c, v = self.c, self.s.vector
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

        def nest(d: int) -> None:
            if d < self.n:
                with self._loop(f"u{d}", f"e{d}"):
                    self.src.line(f"const int64_t i{d} = b{d} + u{d};")
                    nest(d + 1)
                return
            self.src.line(f"{acc_t} part[{v}];")
            with self._loop("v", f"{v}L"):
                self.src.line(f"part[v] = {init};")
            self._reduce_loops(last, reduce_row)
            self.src.line(f"{acc_t} acc = part[0];")
            with self._loop("v", f"{v}L", start="1"):
                self.src.line(f"acc = {combine(c.reduce_op, c.acc_dtype, 'acc', 'part[v]')};")
            self._finish("acc")
        nest(0)
