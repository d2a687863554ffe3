"""Convolution patches read in place: rendering a GEMM operand read straight from a
padded input (the layout, `DirectOperand`, is decided in compiler/schedule/in_place.py
and recorded in the plan): the static table of per-k offsets, each panel's base
offset, and the padded copy of the input made once per call.
"""

from __future__ import annotations

import math

from compiler.codegen.c.stage import write_box_copy
from compiler.codegen.cexpr import literal
from compiler.codegen.csource import CSource
from compiler.schedule.gemm_blocking import DirectOperand

KOFF = "tf_koff"  # the kernel's static table of per-k offsets


def koff_table(d: DirectOperand, src: CSource) -> None:
    """The file-scope table of per-k offsets."""
    per_line, koff = 16, d.koff()
    values = [", ".join(str(v) for v in koff[i:i + per_line]) for i in range(0, len(koff), per_line)]
    src.line(f"static const int32_t {KOFF}[{len(koff)}] = {{")
    src.extend([f"  {v}," for v in values])
    src.line("};")


def panel_base(d: DirectOperand, panel: str) -> str:
    """C expression: offset in `pad` of global panel number `panel` (k = 0) at the task's
    batch indices (`i<d>`)."""
    terms = [str(d.base), f"({panel}) % {d.line_panels}L * {d.panel * d.step}L",
             *(f"i{axis} * {off}L" for axis, off in d.batch)]
    step = d.line_panels
    for _, extent, off in reversed(d.outer):
        terms.append(f"({panel}) / {step}L % {extent}L * {off}L")
        step *= extent
    return " + ".join(terms)


def write_padded_copy(d: DirectOperand, shape: tuple[int, ...], src: CSource) -> None:
    """Statements filling `float* pad` from `in<input>` (`shape`): the box the windows reach
    (the pad value where it leaves the input, as c/stage.py stages windows), then the slack."""
    write_box_copy(src, "pad", f"in{d.input}", shape, d.extents, [f"({lo}L)" for lo in d.lo],
                   literal(d.pad_value, "float32"), "float")
    src.line(f"for (int64_t q = {math.prod(d.extents)}L; q < {d.floats}L; ++q) pad[q] = 0.0f;")
