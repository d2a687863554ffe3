"""Convolution patches read in place: where a GEMM operand can be read straight from a
padded input, and how it is then laid out (`direct_layout`); the costs that
compiler/schedule/cpu_gemm.py (`orientations`) weighs to choose it.

The packed GEMM path gathers a convolution's input patches into panels on every
call (im2col): K x N elements written and read back, each feeding only M
multiply-adds. With few output channels that gather dominates: 41% of a
32-channel 3x3 convolution on a 32 x 32 map, 22% of a 64-channel one on 56 x 56.

Where consecutive output positions along the innermost output axis read input
elements a constant `step` apart (any stride, dilation or padding), the
micro-kernel reads the patches from the input itself: for reduce index k, position
i of a panel is at `panel base + koff[k] + step * i`. Padding is handled at every
call by copying the input into a buffer extended to the window's reach (the pad
value around it; not along a dimension a whole line reads at one index, where the live
taps skip what leaves the input: `_trimmed_reach`), so every read is in bounds, and the
offsets koff are a static table; where the windows reach no padding and no panel reads past the input's end
(a 1x1 convolution whose lines fill whole panels) the input is read without a copy. The
team makes the copy once, or, where the tasks split only the positions, each thread
copies the rows each task reads (compiler/schedule/row_reach.py) in the same layout, the
task's first row at row 0 (the same lines for every task: they stay in its L2).
The patches can be either operand:
- B (the SIMD lanes: output positions in vectors), where step is 1: a stride s along
  the rows (2 to MAX_PHASES) is made 1 by splitting the copy's columns into s phases
  (column x at (x % s) * width + x // s), each tap's offset naming its phase, or
- A (broadcast rows: the output channels then fill the vectors), any step: the
  stem's 7x7 stride-2 convolution, and small maps whose rows fill few lanes.

The output positions are walked in lines, each cut into panels (the last one
partly past the line's end: what it computes nobody stores), so that side becomes
lines x panels x panel width. A line is one output row, or, where the next axis
out (a convolution's height) moves a whole number of steps of (W + pads), an output
plane walked at that period: the positions between a row's end and the next row's
start are computed and dropped ((W + pads) / W of the work instead of a last panel
per row: 56-wide rows 58 / 56 instead of 64 / 56; 14-wide rows 16 / 14 instead of
32 / 14). The layout is recorded in the plan (`DirectOperand`,
compiler/schedule/gemm_blocking.py); compiler/codegen/c/direct.py renders it.

Which orientation, and whether to gather instead, is a model (`orientations`):
wasted positions and channels, one copy of the input, PACK_COST multiply-adds'
worth per gathered element (more when rows are shorter than a vector and the
gather copies element by element), SCATTER_COST per output stored across the
channels. Measured (Zen 5, one thread, kernel alone): a 32-channel 3x3
convolution on 32 x 32 113 -> 71 us; 64 channels on 56 x 56 1080 -> 888 us.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from compiler.ir.affine import LinearForm, form_bounds, linear_form, row_major_strides
from compiler.ir.te import Compute, Load
from compiler.schedule.gemm_blocking import DirectOperand
from compiler.schedule.live_taps import live_taps

# A patch element gathered into a panel costs about as much time as this many of the
# micro-kernel's multiply-adds (one per row of A): packing took 41% of a 32-row and 22%
# of a 64-row 3x3 convolution's time; rows shorter than a vector are copied element by
# element, 18% of a 256-row one on a 14 x 14 map.
PACK_COST = 20
PACK_COST_SCALAR = 56
# An output of A in place, whose tile holds the channels along its rows: stored across the
# channels it lost 72 -> 87 us to B in place on a 32-channel 3x3 convolution over 32 x 32
# (K = 288), and won 891 -> 858 us on 64 channels over 56 x 56 (Zen 5). Output rows of
# whole vectors are now stored along the row from a tile transposed in registers
# (c/gemm.py), about this much on a Sapphire Rapids core (the stem's 800k outputs, 0.2 ns
# each); the element-by-element store it replaced cost about 5 times as much there.
SCATTER_COST = 20
# Strides up to this are read in place as B by splitting the copy's columns into phases
# (`_phases`); a patchify stem's larger stride leaves each phase a few columns wide.
MAX_PHASES = 4


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
    # Axes off the walked side that move the load are the contraction's batch axes (a
    # grouped convolution's group): each task adds its batch index's offset to the panels'.
    others = [d for d, a in enumerate(c.axes) if d not in axes and a.extent > 1]
    ranges = {a.name: (0, a.extent - 1) for a in c.all_axes()}
    shape = c.inputs[load.input].shape
    reach = [form_bounds(f, ranges) for f in forms]
    d = _layout(c, load, side, forms, walked, others, reach, panel, unit_step)
    if d is None:
        return None
    trimmed = _trimmed_reach(c, forms, reach, shape, d)
    if trimmed == reach or live_taps(c, load, d) is None:
        return d
    cut = _layout(c, load, side, forms, walked, others, trimmed, panel, unit_step)
    return cut if cut is not None and cut.fold is None else d


def _trimmed_reach(c: Compute, forms: Sequence[LinearForm], reach: Sequence[tuple[int, int]],
                   shape: Sequence[int], d: DirectOperand) -> list[tuple[int, int]]:
    """`reach` clipped to the input along each dimension whose index is the same for every
    position of a panel (moved by the line's outer axes and at most one reduce axis,
    not by the positions along the line): there a tap that leaves the input leaves it
    for the whole panel, and the live taps (compiler/schedule/live_taps.py) skip it, so
    the copy needs no padding rows. Only where each line is one output row (no fold):
    a dilated convolution's copy was 68 x 68 a channel for a 32 x 32 map at rate 18,
    now 32 x 68."""
    if d.fold is not None:
        return list(reach)
    inner = c.axes[d.inner].name
    reduce_names = {a.name for a in c.reduce_axes}
    out = []
    for (_, coefs), (a, b), n in zip(forms, reach, shape, strict=True):
        fixed = inner not in coefs and sum(v in reduce_names for v in coefs) <= 1
        lo, hi = max(a, 0), min(b, n - 1)
        out.append((lo, hi) if fixed and lo <= hi else (a, b))
    return out


def _layout(c: Compute, load: Load, side: str, forms: Sequence[LinearForm], walked: Sequence[int],
            others: Sequence[int], reach: Sequence[tuple[int, int]], panel: int, unit_step: bool) -> DirectOperand | None:
    """The layout of `direct_layout` for a copy of the box `reach` (per input dimension)."""
    shape = c.inputs[load.input].shape
    lo = tuple(a for a, _ in reach)
    extents = tuple(b - a + 1 for a, b in reach)
    if load.pad is None and any(a < 0 or a + e > n for a, e, n in zip(lo, extents, shape, strict=True)):
        return None
    inner = walked[-1]
    phases = _phases(c, forms, inner, [*walked, *others]) if unit_step else 1
    # the box in `pad`: a polyphase box's lines hold whole phases (the last ones padded)
    stored = (*extents[:-1], phases * -(-extents[-1] // phases))
    strides = row_major_strides(stored)

    def offset(var: str, columns: bool = True) -> int:  # elements of `pad` one step of `var` moves the address
        moved = sum(f[1].get(var, 0) * s for f, s in zip(forms[:-1], strides, strict=False))
        return moved + forms[-1][1].get(var, 0) // phases if columns else moved
    step, width = offset(c.axes[inner].name), c.axes[inner].extent
    if step < 1 or (unit_step and step != 1) or math.prod(stored) + step * panel * 2 >= 1 << 31:
        return None
    fold = None
    if len(walked) > 1:
        axis = walked[-2]
        period, rest = divmod(offset(c.axes[axis].name), step)
        line = (c.axes[axis].extent - 1) * period + width
        if not rest and period >= width and (
                -(-line // panel) * panel / c.axes[axis].extent < -(-width // panel) * panel):
            fold = (axis, c.axes[axis].extent, period)
    # A polyphase box's columns go to the per-tap table (the phase a tap reads depends on
    # its column, not linearly), so the constant part and the taps' steps leave them out.
    first = [f[0] - a for f, a in zip(forms, lo, strict=True)]
    base = sum(v * s for v, s in zip(first[:-1], strides, strict=False)) + (first[-1] if phases == 1 else 0)
    outer = tuple((d, c.axes[d].extent, offset(c.axes[d].name)) for d in walked[:-1]
                  if fold is None or d != fold[0])
    pad = float(load.pad) if load.pad is not None else 0.0
    batch = tuple((d, offset(c.axes[d].name)) for d in others if offset(c.axes[d].name))
    k_steps = tuple((a.extent, offset(a.name, columns=phases == 1)) for a in c.reduce_axes)
    polyphase = {} if phases == 1 else {
        "phases": phases, "phase_width": stored[-1] // phases, "phase_first": first[-1],
        "phase_steps": tuple(forms[-1][1].get(a.name, 0) for a in c.reduce_axes)}
    d = DirectOperand(side, load.input, lo, extents, pad, inner, width, panel, step, fold, outer,
                      base, k_steps, batch, **polyphase)
    # Where the box the windows reach is the whole input (a 1x1 convolution, or padding
    # that is never read) and no panel reads past its end, the input is read itself.
    if phases > 1 or any(lo) or extents != tuple(shape):
        return d
    last = (d.base + (d.line_panels * d.panel - 1) * d.step + d.max_koff()
            + sum((e - 1) * off for _, e, off in d.outer) + sum((c.axes[a].extent - 1) * off for a, off in batch))
    return dataclasses.replace(d, copied=False) if last < math.prod(shape) else d


def _phases(c: Compute, forms: Sequence[LinearForm], inner: int, walked: Sequence[int]) -> int:
    """Phases that make the walked innermost axis read consecutive elements: its stride
    along the load's last dimension where it moves nothing else and every other walked
    axis moves that dimension by whole strides (a strided convolution's output columns;
    the rows and batch move only outer dimensions, and the taps read every phase); 1 where no
    split helps."""
    name = c.axes[inner].name
    stride = forms[-1][1].get(name, 0)
    if not 1 < stride <= MAX_PHASES or any(f[1].get(name, 0) for f in forms[:-1]):
        return 1
    moves = (forms[-1][1].get(c.axes[d].name, 0) for d in walked)
    if not all(k >= 0 and k % stride == 0 for k in moves):
        return 1
    # Every phase must be read: a 1x1 stride-2 convolution's taps read only the even columns,
    # and split in phases its lines would hold the odd ones too (its copy all of both, half its
    # multiply-adds on positions nobody stores): 115 us in a bottleneck ResNet's run, where its
    # patches gathered take 29 (128 px, two threads, Zen 4). Then it is not read in place as B.
    const, coefs = forms[-1]
    read = {const % stride}
    for a in c.reduce_axes:
        read = {(p + coefs.get(a.name, 0) * r) % stride for p in read for r in range(min(a.extent, stride))}
    return stride if len(read) == stride else 1
