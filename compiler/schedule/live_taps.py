"""Taps that read only padding: for each panel of a convolution's patches read in place
(`DirectOperand`, compiler/schedule/in_place.py), the reduce indices whose reads land
inside the input for at least one position the panel stores. The others multiply the
pad value 0 and add nothing, so the micro-kernel skips them (compiler/codegen/c/direct.py).

A dilated convolution reads mostly padding near its borders: at rate 18 on a 32 x 32
map, a 3 x 3 tap row is padding for 18 of the 32 output rows, and 40% of the multiply-adds
of the row taps (more when a panel's positions also share a column side) read nothing.

Each reduce axis keeps a range (first, last) per panel: the hull of the indices that read
inside the input along the dimension it moves, for some position of the panel (output
axes bounded by the hull of the panel's stored positions). The hulls only widen the live
set, so a skipped tap is always one that reads padding for every position, and skipping
it leaves the sum unchanged (x + 0 is x).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

from compiler.ir.affine import LinearForm, form_bounds, linear_form
from compiler.ir.te import Axis, Compute, Load
from compiler.schedule.gemm_blocking import DirectOperand

Ranges = tuple[tuple[int, int], ...]  # (first, last) per reduce axis; first > last: none


def live_taps(c: Compute, load: Load, d: DirectOperand) -> list[Ranges] | None:
    """Per panel of `d` (its global number within one batch index), the range of each reduce
    axis of `c` whose taps may read inside `load`'s input; None where no tap can be skipped
    for any panel (no padding, a pad value other than 0, or indices the analysis cannot
    bound)."""
    if load.pad is None or d.pad_value != 0.0:
        return None
    taps = _live_taps(load, tuple(c.axes), tuple(c.reduce_axes), c.inputs[load.input].shape, d)
    return None if taps is None else list(taps)


# A compile asks again for the same operand of the same convolution (its candidates, the
# orientations tried for each, the plans made again after measuring): ResNet-50's 666 asks
# were 102 operands, their panels walked 1.3 s in all.
@functools.lru_cache(maxsize=1024)
def _live_taps(load: Load, axes: tuple[Axis, ...], reduce_axes: tuple[Axis, ...], shape: tuple[int, ...],
               d: DirectOperand) -> tuple[Ranges, ...] | None:
    forms = [linear_form(i) for i in load.indices]
    if any(f is None for f in forms):
        return None
    reduce_names = [a.name for a in reduce_axes]
    full = tuple((0, a.extent - 1) for a in reduce_axes)
    # the padded dimensions, each moved by at most one reduce axis (a convolution's taps)
    checks = []
    for form, n in zip(forms, shape, strict=True):
        assert form is not None
        moving = [v for v in form[1] if v in reduce_names]
        if len(moving) <= 1:
            tap = moving[0] if moving else None
            positions = (form[0], {v: k for v, k in form[1].items() if v != tap})
            checks.append(_Check(positions, n, tap, form[1][tap] if tap is not None else 0))
    ranges = {a.name: (0, a.extent - 1) for a in axes}
    out = []
    none = tuple((0, -1) for _ in full)
    for panel in range(math.prod(e for _, e, _ in d.outer) * d.line_panels):
        stored = _panel_axes(axes, d, panel)
        out.append(none if stored is None else _panel_ranges(checks, {**ranges, **stored}, reduce_names, full))
    return tuple(out) if any(r != full for r in out) else None


def live_fraction(c: Compute, taps: list[Ranges] | None) -> float:
    """Share of the multiply-adds the live taps keep (1.0 when none are skipped)."""
    if taps is None:
        return 1.0
    k = math.prod(a.extent for a in c.reduce_axes)
    return sum(math.prod(max(0, b - a + 1) for a, b in r) for r in taps) / (k * len(taps))


def _panel_axes(c_axes: Sequence[Axis], d: DirectOperand, panel: int) -> dict[str, tuple[int, int]] | None:
    """Hull (first, last) of each walked output axis over the positions `panel` stores
    (None: it stores none)."""
    axes: dict[str, tuple[int, int]] = {}
    line = panel // d.line_panels
    for axis, extent, _ in reversed(d.outer):
        axes[c_axes[axis].name] = (line % extent, line % extent)
        line //= extent
    first = panel % d.line_panels * d.panel
    last = min(first + d.panel, d.line) - 1
    if d.fold is None:
        axes[c_axes[d.inner].name] = (first, min(last, d.width - 1))
        return axes
    axis, _, period = d.fold
    top, bottom = first // period + (first % period >= d.width), last // period
    if top > bottom:  # the panel holds only positions between rows: it stores nothing
        return None
    if top == bottom:
        cols = (max(first - top * period, 0), min(last - top * period, d.width - 1))
    else:  # the end of one row and the start of the next
        cols = (0, d.width - 1)
    axes[c_axes[axis].name] = (top, bottom)
    axes[c_axes[d.inner].name] = cols
    return axes


class _Check(NamedTuple):
    """One padded dimension of the load: its index `positions + k * tap` (`tap` the reduce
    axis moving it, None where none does) must lie in [0, n). Made once per load, not per
    panel: the panels (266 thousand in ResNet-50's compile) only bound it."""

    positions: LinearForm
    n: int
    tap: str | None
    k: int


def _panel_ranges(checks: list[_Check], ranges: dict[str, tuple[int, int]],
                  reduce_names: list[str], full: Ranges) -> Ranges:
    """Each reduce axis's live range, given the output axes' `ranges` for one panel."""
    live = dict(zip(reduce_names, full, strict=True))
    for positions, n, tap, k in checks:
        lo, hi = form_bounds(positions, ranges)
        if tap is None:
            if hi < 0 or lo > n - 1:  # the panel reads only padding
                return tuple((0, -1) for _ in full)
            continue
        if k > 0:  # some position reads inside: lo + k r <= n - 1 and hi + k r >= 0
            first, last = -(hi // k), (n - 1 - lo) // k
        else:
            first, last = -((n - 1 - lo) // -k), hi // -k
        a, b = live[tap]
        live[tap] = (max(a, first), min(b, last))
    return tuple(live[name] for name in reduce_names)
