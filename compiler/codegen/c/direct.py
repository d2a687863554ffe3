"""Convolution patches read in place: a GEMM operand straight from a padded input.

The packed GEMM path (c/gemm.py) gathers a convolution's input patches into
panels on every call (im2col): K x N elements written and read back, each feeding
only M multiply-adds. With few output channels that gather dominates: 41% of a
32-channel 3x3 convolution on a 32 x 32 map, 22% of a 64-channel one on 56 x 56.

Where consecutive output positions along the innermost output axis read input
elements a constant `step` apart (any stride, dilation or padding), the
micro-kernel reads the patches from the input itself: for reduce index k, position
i of a panel is at `panel base + koff[k] + step * i`. Padding is handled once per
call by copying the input into a buffer extended to the window's reach (the pad
value around it), so every read is in bounds, and the offsets koff are a static
table. The patches can be either operand:
- B (the SIMD lanes: output positions in vectors), where step is 1, or
- A (broadcast rows: the output channels then fill the vectors), any step: the
  stem's 7x7 stride-2 convolution, and small maps whose rows fill few lanes.

The output positions are walked in lines, each cut into panels (the last one
partly past the line's end: what it computes nobody stores), so that side becomes
lines x panels x panel width. A line is one output row, or, where the next axis
out (a convolution's height) moves a whole number of steps of (W + pads), an output
plane walked at that period: the positions between a row's end and the next row's
start are computed and dropped ((W + pads) / W of the work instead of a last panel
per row: 56-wide rows 58 / 56 instead of 64 / 56; 14-wide rows 16 / 14 instead of
32 / 14).

Which orientation, and whether to gather instead, is a model (c/gemm.py,
`oriented_gemm`): wasted positions and channels, one copy of the input, PACK_COST
multiply-adds' worth per gathered element (more when rows are shorter than a
vector and the gather copies element by element), SCATTER_COST per output stored
across the channels. Measured (Zen 5, one thread, kernel alone): a 32-channel
3x3 convolution on 32 x 32 113 -> 71 us; 64 channels on 56 x 56 1080 -> 888 us.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.codegen.c.stage import write_box_copy
from compiler.codegen.cexpr import literal, row_major_strides
from compiler.codegen.csource import CSource
from compiler.ir.affine import form_bounds, linear_form
from compiler.ir.te import Compute, Load

# A patch element gathered into a panel costs about as much time as this many of the
# micro-kernel's multiply-adds (one per row of A): packing took 41% of a 32-row and 22%
# of a 64-row 3x3 convolution's time; rows shorter than a vector are copied element by
# element, 18% of a 256-row one on a 14 x 14 map.
PACK_COST = 20
PACK_COST_SCALAR = 56
# An output stored across the channels (a scalar store per element, a map's size apart)
# instead of along the row: A in place lost 72 -> 87 us to B in place on a 32-channel
# 3x3 convolution over 32 x 32 (K = 288), and won 891 -> 858 us on 64 channels over 56 x 56.
SCATTER_COST = 20
KOFF = "tf_koff"  # the kernel's static table of per-k offsets


@dataclass(frozen=True)
class DirectOperand:
    """A GEMM side (`side`: "a" rows, "b" columns) read in place from `pad`, a copy of
    input `input` covering the indices the windows reach: dimension d holds input
    indices lo[d] ... lo[d] + extents[d] - 1."""

    side: str
    input: int
    lo: tuple[int, ...]
    extents: tuple[int, ...]
    pad_value: str  # C literal for the indices outside the input
    inner: int  # position (in the Compute's axes) of the output axis the panels walk
    width: int  # its extent
    panel: int  # positions per panel (NR for B, MR for A)
    step: int  # elements of `pad` between consecutive positions
    fold: tuple[int, int, int] | None  # the axis a line also spans: (position, extent, period)
    outer: tuple[tuple[int, int, int], ...]  # other walked axes: (position, extent, offset per step)
    base: int  # offset in `pad` of every index's constant part
    k_steps: tuple[tuple[int, int], ...]  # per reduce axis: (extent, offset in `pad` per step)

    def koff(self) -> list[int]:
        """Offset in `pad` of each flat (row-major) reduce index."""
        offsets = [0]
        for extent, step in self.k_steps:
            offsets = [o + r * step for o in offsets for r in range(extent)]
        return offsets

    @property
    def line(self) -> int:
        """Positions in a line: an output row, or a plane at the period."""
        if self.fold is None:
            return self.width
        _, rows, period = self.fold
        return (rows - 1) * period + self.width

    @property
    def line_panels(self) -> int:
        return -(-self.line // self.panel)

    @property
    def positions(self) -> int:
        """The side's extent in the GEMM: the panels of every line."""
        return math.prod(e for _, e, _ in self.outer) * self.line_panels * self.panel

    @property
    def floats(self) -> int:
        """Size of `pad`: the padded input and one panel of slack (a last panel's overrun)."""
        return math.prod(self.extents) + self.step * self.panel


def direct_layout(c: Compute, load: Load, side: str, axes: Sequence[int], panel: int,
                  unit_step: bool) -> DirectOperand | None:
    """How the patches that `load` reads over output `axes` are read in place, in panels
    of `panel` positions (`unit_step`: consecutive positions must be consecutive input
    elements, as vector loads need); None where the reads are not affine or too far
    apart for the int32 offsets."""
    affine = [linear_form(i) for i in load.indices]
    forms = [f for f in affine if f is not None]
    walked = [d for d in axes if c.axes[d].extent > 1]
    if len(forms) < len(affine) or not walked:
        return None
    ranges = {a.name: (0, a.extent - 1) for a in c.all_axes()}
    shape = c.inputs[load.input].shape
    reach = [form_bounds(f, ranges) for f in forms]
    lo = tuple(a for a, _ in reach)
    extents = tuple(b - a + 1 for a, b in reach)
    if load.pad is None and any(a < 0 or a + e > n for a, e, n in zip(lo, extents, shape, strict=True)):
        return None
    strides = row_major_strides(extents)

    def offset(var: str) -> int:  # elements of `pad` one step of `var` moves the address
        return sum(f[1].get(var, 0) * s for f, s in zip(forms, strides, strict=True))
    inner = walked[-1]
    step, width = offset(c.axes[inner].name), c.axes[inner].extent
    if step < 1 or (unit_step and step != 1) or math.prod(extents) + step * panel * 2 >= 1 << 31:
        return None
    fold = None
    if len(walked) > 1:
        axis = walked[-2]
        period, rest = divmod(offset(c.axes[axis].name), step)
        line = (c.axes[axis].extent - 1) * period + width
        if not rest and period >= width and (
                -(-line // panel) * panel / c.axes[axis].extent < -(-width // panel) * panel):
            fold = (axis, c.axes[axis].extent, period)
    base = sum((f[0] - a) * s for f, a, s in zip(forms, lo, strides, strict=True))
    outer = tuple((d, c.axes[d].extent, offset(c.axes[d].name)) for d in walked[:-1]
                  if fold is None or d != fold[0])
    pad = literal(load.pad if load.pad is not None else 0.0, load.dtype)
    return DirectOperand(side, load.input, lo, extents, pad, inner, width, panel, step, fold, outer,
                         base, tuple((a.extent, offset(a.name)) for a in c.reduce_axes))


def koff_table(d: DirectOperand, src: CSource) -> None:
    """The file-scope table of per-k offsets."""
    per_line, koff = 16, d.koff()
    values = [", ".join(str(v) for v in koff[i:i + per_line]) for i in range(0, len(koff), per_line)]
    src.line(f"static const int32_t {KOFF}[{len(koff)}] = {{")
    src.extend([f"  {v}," for v in values])
    src.line("};")


def panel_base(d: DirectOperand, panel: str) -> str:
    """C expression: offset in `pad` of global panel number `panel` (k = 0)."""
    terms = [str(d.base), f"({panel}) % {d.line_panels}L * {d.panel * d.step}L"]
    step = d.line_panels
    for _, extent, off in reversed(d.outer):
        terms.append(f"({panel}) / {step}L % {extent}L * {off}L")
        step *= extent
    return " + ".join(terms)


def write_padded_copy(d: DirectOperand, shape: tuple[int, ...], src: CSource) -> None:
    """Statements filling `float* pad` from `in<input>` (`shape`): the box the windows reach
    (the pad value where it leaves the input, as c/stage.py stages windows), then the slack."""
    write_box_copy(src, "pad", f"in{d.input}", shape, d.extents, [f"({lo}L)" for lo in d.lo], d.pad_value, "float")
    src.line(f"for (int64_t q = {math.prod(d.extents)}L; q < {d.floats}L; ++q) pad[q] = 0.0f;")
