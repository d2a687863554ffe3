"""Convolution patches read in place: the GEMM's B panels straight from a padded input.

The packed GEMM path (c_gemm.py) gathers a convolution's input patches into B
panels on every call (im2col): K x N elements written and read back, each feeding
only M multiply-adds. With few output channels that gather dominates: 41% of a
32-channel 3x3 convolution on a 32 x 32 map, 22% of a 64-channel one on 56 x 56.

When the patches of NR consecutive output columns along the innermost output axis
are NR consecutive input elements (stride 1 along it, any dilation or padding),
the micro-kernel can load its B vectors from the input itself: for reduce index k
at address `panel base + koff[k]`. Padding is handled once per call by copying the
input into a buffer extended to the window's reach (the pad value around it), so
every load is in bounds, and the offsets koff are a static table.

The output columns are walked in lines, each cut into panels of NR (the last one
partly past the line's end: those lanes compute values nobody stores), so N
becomes lines x panels x NR. A line is one output row, or, where the next axis out
(a convolution's height) also moves one row of the padded input per step, a whole
output plane walked at the padded row's period: the positions between a row's end
and the next row's start are computed and dropped, (W + pads) / W of the work
instead of a last panel per row (56-wide rows: 58 / 56 instead of 64 / 56; 14-wide
rows: 16 / 14 instead of 32 / 14).

Whether it pays is a model: direct costs those wasted lanes plus one copy of the
input; the gather costs PACK_COST multiply-adds' worth per patch element (more when
rows are shorter than a vector and it copies element by element). Measured (Zen 5,
one thread, kernel alone): a 32-channel 3x3 convolution on 32 x 32 113 -> 71 us,
64 channels on 56 x 56 1080 -> 1000 us with row lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.codegen.affine import form_bounds, linear_form
from compiler.codegen.cexpr import literal
from compiler.codegen.csource import CSource
from compiler.ir.contraction import Contraction
from compiler.ir.te import Compute, Load

# A patch element gathered into a B panel costs about as much time as this many of the
# micro-kernel's multiply-adds (one per row of A): packing took 41% of a 32-row and 22%
# of a 64-row 3x3 convolution's time; rows shorter than a vector are copied element by
# element, 18% of a 256-row one on a 14 x 14 map.
PACK_COST = 20
PACK_COST_SCALAR = 56
KOFF = "tf_koff"  # the kernel's static table of per-k offsets


@dataclass(frozen=True)
class DirectOperand:
    """B read in place from `pad`, a copy of input `input` covering the indices the
    windows reach: dimension d holds input indices lo[d] ... lo[d] + extents[d] - 1."""

    input: int
    lo: tuple[int, ...]
    extents: tuple[int, ...]
    pad_value: str  # C literal for the indices outside the input
    inner: int  # position (in the Compute's axes) of the output axis the panels walk
    width: int  # its extent
    panel: int  # NR: output columns per panel
    fold: tuple[int, int, int] | None  # the axis a line also spans: (position, extent, period)
    outer: tuple[tuple[int, int, int], ...]  # other cols axes: (position, extent, offset per step)
    base: int  # offset in `pad` of every index's constant part
    koff: tuple[int, ...]  # offset in `pad` of each flat reduce index

    @property
    def line(self) -> int:
        """Positions in a line: an output row, or a plane at the padded row's period."""
        if self.fold is None:
            return self.width
        _, rows, period = self.fold
        return (rows - 1) * period + self.width

    @property
    def line_panels(self) -> int:
        return -(-self.line // self.panel)

    @property
    def columns(self) -> int:
        """The GEMM's N: the panels of every line, NR each."""
        return math.prod(e for _, e, _ in self.outer) * self.line_panels * self.panel

    @property
    def floats(self) -> int:
        """Size of `pad`: the padded input and one panel of slack (a last panel's overrun)."""
        return math.prod(self.extents) + self.panel


def direct_operand(c: Compute, m: Contraction, panel: int, lanes: int, rows: int,
                   prepacked: tuple[str, ...]) -> DirectOperand | None:
    """How B is read in place for contraction `m` of `c` with panels of `panel` columns
    (vectors of `lanes`), or None where it cannot be or the model says gathering it is
    cheaper (`rows`: M padded to the micro-kernel; `prepacked`: the sides packed at load)."""
    rhs = m.rhs
    if prepacked != ("a",) or not isinstance(rhs, Load) or any(c.axes[d].extent > 1 for d in m.batch):
        return None
    affine = [linear_form(i) for i in rhs.indices]
    forms = [f for f in affine if f is not None]
    if len(forms) < len(affine):
        return None
    cols = [d for d in m.cols if c.axes[d].extent > 1]
    if not cols:
        return None
    ranges = {a.name: (0, a.extent - 1) for a in c.all_axes()}
    shape = c.inputs[rhs.input].shape
    reach = [form_bounds(f, ranges) for f in forms]
    lo = tuple(a for a, _ in reach)
    extents = tuple(b - a + 1 for a, b in reach)
    strides = [math.prod(extents[d + 1:]) for d in range(len(extents))]

    def offset(var: str) -> int:  # elements of `pad` one step of `var` moves the address
        return sum(f[1].get(var, 0) * s for f, s in zip(forms, strides, strict=True))
    inner = cols[-1]
    if math.prod(extents) + panel >= 1 << 31:  # koff and the addresses it makes are int32
        return None
    if offset(c.axes[inner].name) != 1 or (rhs.pad is None and any(
            a < 0 or a + e > n for a, e, n in zip(lo, extents, shape, strict=True))):
        return None
    width = c.axes[inner].extent
    k = math.prod(a.extent for a in c.reduce_axes)
    n = math.prod(c.axes[d].extent for d in cols)
    waste = -(-width // panel) * panel / width
    fold = None
    if len(cols) > 1 and offset(c.axes[cols[-2]].name) >= width:
        rows_axis = cols[-2]
        folded = (rows_axis, c.axes[rows_axis].extent, offset(c.axes[rows_axis].name))
        line = (folded[1] - 1) * folded[2] + width
        if -(-line // panel) * panel / (folded[1] * width) < waste:
            fold, waste = folded, -(-line // panel) * panel / (folded[1] * width)
    pack = PACK_COST if width >= lanes else PACK_COST_SCALAR  # the gather copies whole vectors of a row
    if rows * k * n * waste + pack * math.prod(extents) >= rows * k * n + pack * k * n:
        return None
    koff = []
    for flat in range(k):
        at, total = flat, 0
        for a in reversed(c.reduce_axes):
            at, r = divmod(at, a.extent)
            total += r * offset(a.name)
        koff.append(total)
    base = sum((f[0] - a) * s for f, a, s in zip(forms, lo, strides, strict=True))
    outer = tuple((d, c.axes[d].extent, offset(c.axes[d].name)) for d in cols[:-1]
                  if fold is None or d != fold[0])
    pad = literal(rhs.pad if rhs.pad is not None else 0.0, rhs.dtype)
    return DirectOperand(rhs.input, lo, extents, pad, inner, width, panel, fold, outer, base, tuple(koff))


def koff_table(d: DirectOperand, src: CSource) -> None:
    """The file-scope table of per-k offsets."""
    per_line = 16
    values = [", ".join(str(v) for v in d.koff[i:i + per_line]) for i in range(0, len(d.koff), per_line)]
    src.line(f"static const int32_t {KOFF}[{len(d.koff)}] = {{")
    src.extend([f"  {v}," for v in values])
    src.line("};")


def panel_base(d: DirectOperand, panel: str) -> str:
    """C expression: offset in `pad` of global panel number `panel` (k = 0)."""
    terms = [str(d.base), f"({panel}) % {d.line_panels}L * {d.panel}L"]
    step = d.line_panels
    for _, extent, off in reversed(d.outer):
        terms.append(f"({panel}) / {step}L % {extent}L * {off}L")
        step *= extent
    return " + ".join(terms)


def write_padded_copy(d: DirectOperand, shape: tuple[int, ...], src: CSource) -> None:
    """Statements filling `float* pad` from `in<input>` (`shape`): the pad value where an
    index falls outside the input, then the slack."""
    inner_lo, inner_n, inner_e = d.lo[-1], shape[-1], d.extents[-1]
    rows = math.prod(d.extents[:-1])
    in_strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    with src.block(f"for (int64_t p = 0; p < {rows}L; ++p)"):
        src.line(f"float* const row = pad + p * {inner_e}L;")
        src.line("int64_t source = 0, outside = 0;")
        inner_rows = 1
        for dim in reversed(range(len(shape) - 1)):
            src.line(f"const int64_t x{dim} = p / {inner_rows}L % {d.extents[dim]}L + {d.lo[dim]}L;")
            src.line(f"outside |= (uint64_t)x{dim} >= {shape[dim]}UL; source += x{dim} * {in_strides[dim]}L;")
            inner_rows *= d.extents[dim]
        first = min(max(0, -inner_lo), inner_e)
        end = min(max(first, inner_n - inner_lo), inner_e)
        src.line(f"const int64_t first = outside ? {inner_e}L : {first}L, end = outside ? {inner_e}L : {end}L;")
        src.line(f"for (int64_t q = 0; q < first; ++q) row[q] = {d.pad_value};")
        src.line(f"if (end > first) __builtin_memcpy(row + first, in{d.input} + source + first + ({inner_lo}L), "
                 "(size_t)(end - first) * sizeof(float));")
        src.line(f"for (int64_t q = end; q < {inner_e}L; ++q) row[q] = {d.pad_value};")
    src.line(f"for (int64_t q = {math.prod(d.extents)}L; q < {d.floats}L; ++q) pad[q] = 0.0f;")
