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
from compiler.ir.affine import row_major_strides
from compiler.ir.te import Compute
from compiler.schedule.gemm_blocking import DirectOperand, GemmBlocking
from compiler.schedule.live_taps import Ranges, live_taps
from compiler.schedule.row_reach import RowReach

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
    return live_taps(c, g.read_in_place(c), g.direct)


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
    _zero_slack(d, src)
    write_box_copy(src, "pad", f"in{d.input}", shape, d.extents, [f"({lo}L)" for lo in d.lo],
                   literal(d.pad_value, "float32"), "float", shared=True, phases=d.phases)


def _zero_slack(d: DirectOperand, src: CSource) -> None:
    """The statement zeroing `pad` past the box: the slack a last panel's overrun reads."""
    src.line(f"for (int64_t q = {math.prod(d.stored)}L; q < {d.floats}L; ++q) pad[q] = 0.0f;")


# C name: floats from the offset of the box's row 0 in a thread's own `pad` to where the task's
# rows start it (the panels' bases less it: `write_task_copy`)
ROWS_SHIFT = "hs"


def start_task_copies(d: DirectOperand, src: CSource) -> None:
    """Statements readying a thread's own `pad` (declared by the caller) for its tasks'
    copies (`write_task_copy`): its slack zeroed."""
    _zero_slack(d, src)


def write_task_copy(d: DirectOperand, reach: RowReach, shape: tuple[int, ...], first: str, count: str,
                    src: CSource) -> None:
    """Statements filling the thread's own `pad` with the rows that a task's positions `first`
    .. `first + count - 1` read (`reach`, compiler/schedule/row_reach.py), so the task reads
    what its own core just copied and no thread waits for another's copy. The task's first
    row goes to row 0 of each channel (`ROWS_SHIFT` floats down), whichever rows it reads:
    every task of the thread writes the same lines, which stay in its L2, where rows copied
    to their own places walked the whole padded input by the end of a call, each task's
    lines written back and read for ownership again from L3 on the next (the segmenter's
    3x3 stride-2 32 -> 64 convolution on 128 x 128 pads 2.1 MB; its tasks copy 0.55 MB:
    one thread, Intel Xeon, 1.06-1.14 -> 0.99-1.06 ms). The rows two tasks' windows share are
    copied by each. Positions past a line's end are computed and dropped: what they read
    past the last row copied (at most a line and a panel) is zeroed, not left to whatever
    the scratch held."""
    per_line = d.line_panels * d.panel
    src.line(f"const int64_t l0 = ({first}) / {per_line}L, l1 = ({first} + {count} - 1) / {per_line}L;")
    step = 1
    for axis, extent, _ in reversed(d.outer):  # each walked axis's values over lines l0 .. l1
        whole = f"l0 / {step * extent}L != l1 / {step * extent}L"
        src.line(f"const int64_t v{axis}lo = {whole} ? 0 : l0 / {step}L % {extent}L;")
        src.line(f"const int64_t v{axis}hi = {whole} ? {extent - 1}L : l1 / {step}L % {extent}L;")
        step *= extent
    if d.fold is not None:  # the rows of a plane walked at a period: positions / period
        axis, _, period = d.fold
        src.line(f"const int64_t v{axis}lo = l0 != l1 ? 0 : ({first}) % {per_line}L / {period}L;")
        src.line(f"const int64_t v{axis}hi = l0 != l1 ? {(per_line - 1) // period}L "
                 f": ({first} + {count} - 1) % {per_line}L / {period}L;")
    low = [str(reach.first + reach.low)] + [f"{k}L * v{a}{'lo' if k > 0 else 'hi'}" for a, k in reach.coefs]
    high = [str(reach.first + reach.high)] + [f"{k}L * v{a}{'hi' if k > 0 else 'lo'}" for a, k in reach.coefs]
    src.line(f"int64_t r0 = {' + '.join(low)}, r1 = {' + '.join(high)};")
    src.line("if (r0 < 0) r0 = 0;")
    src.line(f"if (r1 > {d.extents[reach.dim] - 1}L) r1 = {d.extents[reach.dim] - 1}L;")
    row = row_major_strides(d.stored)[reach.dim]
    src.line(f"const int64_t {ROWS_SHIFT} = r0 * {row}L;")
    write_box_copy(src, "pad", f"in{d.input}", shape, d.extents, [f"({lo}L)" for lo in d.lo],
                   literal(d.pad_value, "float32"), "float", phases=d.phases,
                   span=(reach.dim, "r0", "r1 + 1", ROWS_SHIFT))
    _zero_spill(d, reach.dim, src)


def _zero_spill(d: DirectOperand, dim: int, src: CSource) -> None:
    """Zero what dropped positions read past the rows copied to each channel (rows r0 .. r1
    at row 0 on): a line and a panel past them, stopping where the next channel's start."""
    strides = row_major_strides(d.stored)
    block = strides[dim - 1] if dim > 0 else math.prod(d.stored)
    spill = d.stored[-1] + d.panel * d.step
    with src.block(""):
        for k in range(dim):
            src.line(f"for (int64_t z{k} = 0; z{k} < {d.stored[k]}L; ++z{k})")
        with src.block(""):
            start = " + ".join([*(f"z{k} * {strides[k]}L" for k in range(dim)), "0"])
            src.line(f"const int64_t q0 = {start} + (r1 - r0 + 1) * {strides[dim]}L;")
            src.line(f"int64_t q1 = {start} + {block}L;")
            src.line(f"if (q1 > q0 + {spill}L) q1 = q0 + {spill}L;")
            src.line(f"if (q1 > {d.floats}L) q1 = {d.floats}L;")
            src.line("for (int64_t q = q0; q < q1; ++q) pad[q] = 0.0f;")
