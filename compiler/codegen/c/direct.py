"""Convolution patches read in place: rendering a GEMM operand read straight from a
padded input (the layout, `DirectOperand`, is decided in compiler/schedule/in_place.py
and recorded in the plan): the static table of per-k offsets, each panel's base
offset, the padded copy of the input made once per call, and the lists of the taps a
panel reads inside the input where it skips those that read only padding
(compiler/schedule/live_taps.py): a class per panel (0: every tap), and per class and
K block the (offset in `pad`, k from the block's start) pairs of its live taps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from compiler.codegen.c.stage import write_box_copy
from compiler.codegen.cexpr import literal
from compiler.codegen.csource import CSource
from compiler.ir.te import Compute
from compiler.schedule.gemm_blocking import DirectOperand, GemmBlocking
from compiler.schedule.live_taps import Ranges, live_taps

KOFF = "tf_koff"  # the kernel's static table of per-k offsets
LIVE, LIVE_AT, LIVE_CLASS = "tf_live", "tf_live_at", "tf_live_class"  # the live taps' tables


def koff_table(d: DirectOperand, src: CSource) -> None:
    """The file-scope table of per-k offsets."""
    _table("int32_t", KOFF, d.koff(), src)


def _table(ctype: str, name: str, values: Sequence[int], src: CSource) -> None:
    per_line = 16
    rows = [", ".join(str(v) for v in values[i:i + per_line]) for i in range(0, len(values), per_line)]
    src.line(f"static const {ctype} {name}[{max(1, len(values))}] = {{")
    src.extend([f"  {v}," for v in rows] or ["  0,"])
    src.line("};")


def direct_taps(c: Compute, g: GemmBlocking) -> list[Ranges] | None:
    """The live taps of each panel of `g`'s operand read in place (None: it skips none)."""
    if g.direct is None:
        return None
    m = g.contraction(c)
    load = m.lhs if g.direct.side == "a" else m.rhs
    assert load is not None
    return live_taps(c, load, g.direct)  # type: ignore[arg-type]


def live_tables(d: DirectOperand, taps: list[Ranges], k: int, kc: int, src: CSource) -> None:
    """The file-scope tables of the live taps: each panel's class, and where the list of
    each class's live taps in each K block (`kc` deep, of `k`) starts."""
    full = tuple((0, e - 1) for e, _ in d.k_steps)
    classes = {full: 0}
    for r in taps:
        classes.setdefault(r, len(classes))
    koff, starts, pairs = d.koff(), [], []
    for ranges in list(classes)[1:]:
        live = {sum(r * s for r, s in zip(index, _row_major(d), strict=True))
                for index in itertools.product(*(range(a, b + 1) for a, b in ranges))}
        for k0 in range(0, k, kc):
            starts.append(len(pairs))
            pairs.extend(v for q in range(k0, min(k0 + kc, k)) if q in live for v in (koff[q], q - k0))
    starts.append(len(pairs))
    _table("int32_t" if len(classes) > 1 << 15 else "int16_t", LIVE_CLASS, [classes[r] for r in taps], src)
    _table("int32_t", LIVE_AT, starts, src)
    _table("int32_t", LIVE, pairs, src)


def _row_major(d: DirectOperand) -> list[int]:
    """Flat-k stride of each reduce axis."""
    extents = [e for e, _ in d.k_steps]
    return [math.prod(extents[i + 1:]) for i in range(len(extents))]


def live_list(k: int, kc: int, panel: str, src: CSource) -> tuple[str, str]:
    """Statements finding the list of the live taps of global panel `panel` in the current
    K block (at k0); returns the C names of its length and its pointer (the live
    micro-kernel's depth and `koff`)."""
    blocks = -(-k // kc)
    src.line(f"const int64_t li = ({LIVE_CLASS}[{panel}] - 1) * {blocks}L + k0 / {kc}L;")
    src.line(f"const int32_t* const lv = {LIVE} + {LIVE_AT}[li];")
    src.line(f"const int64_t nl = ({LIVE_AT}[li + 1] - {LIVE_AT}[li]) / 2;")
    return "nl", "lv"


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
    """Statements filling `float* pad` from `in<input>` (`shape`): the slack past the box on
    one thread (no wait: the box's loop ends on a barrier), then the box the windows reach (the pad value where it leaves the input,
    as c/stage.py stages windows) shared among the team: each thread of the team must run
    them (copied on one thread, it was the serial part of a convolution on two: 12% of a
    32-channel 3x3 one on a 128 x 128 map)."""
    src.line("#pragma omp single nowait")
    src.line(f"for (int64_t q = {math.prod(d.stored)}L; q < {d.floats}L; ++q) pad[q] = 0.0f;")
    write_box_copy(src, "pad", f"in{d.input}", shape, d.extents, [f"({lo}L)" for lo in d.lo],
                   literal(d.pad_value, "float32"), "float", shared=True, phases=d.phases)
