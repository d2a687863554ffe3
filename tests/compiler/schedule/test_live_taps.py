"""The taps a panel of patches read in place skips (compiler/schedule/live_taps.py): only
ones that read padding for every position the panel stores, and all of those a
dilated convolution's border rows read."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import pytest

from compiler.ir.affine import linear_form
from compiler.ir.te import Compute, Load
from compiler.schedule.cpu_gemm import gemm_blocking, gemm_contraction
from compiler.schedule.gemm_blocking import DirectOperand
from compiler.schedule.live_taps import live_fraction, live_taps
from compiler.schedule.merge_axes import merge_axes
from compiler.schedule.tiling import default_tile

sys.path.insert(0, str(Path(__file__).parents[1] / "codegen"))
from test_c_gemm import cpu, window_conv


def _direct(compute: Compute, lanes: int) -> tuple[Compute, Load, DirectOperand]:
    c, tile = merge_axes(compute, default_tile(compute, cpu(lanes)))
    m = gemm_contraction(c, cpu(lanes))
    assert m is not None
    g = gemm_blocking(c, m, tile, cpu(lanes), constant_inputs=(1, 2))
    assert g.direct is not None
    load = g.contraction(c).lhs if g.direct.side == "a" else g.contraction(c).rhs
    assert isinstance(load, Load)
    return c, load, g.direct


def _stored(c: Compute, d: DirectOperand, panel: int) -> list[dict[str, int]]:
    """The output axes' values at each position `panel` stores."""
    line, out = panel // d.line_panels, []
    outer = {}
    for axis, extent, _ in reversed(d.outer):
        outer[c.axes[axis].name] = line % extent
        line //= extent
    first = panel % d.line_panels * d.panel
    for j in range(first, min(first + d.panel, d.line)):
        row, col = (0, j) if d.fold is None else divmod(j, d.fold[2])
        if col < d.width:
            at = {**outer, c.axes[d.inner].name: col}
            if d.fold is not None:
                at[c.axes[d.fold[0]].name] = row
            out.append(at)
    return out


def _reads_inside(c: Compute, load: Load, at: dict[str, int]) -> bool:
    shape = c.inputs[load.input].shape
    for index, n in zip(load.indices, shape, strict=True):
        form = linear_form(index)
        assert form is not None
        v = form[0] + sum(k * at.get(name, 0) for name, k in form[1].items())
        if not 0 <= v < n:
            return False
    return True


CASES = {
    "dilated_a": (window_conv(1, 8, 32, 12, 12, 3, 3, dilation=5, pads=(5, 5, 5, 5)), 16),
    "dilated_b": (window_conv(1, 4, 6, 12, 40, 3, 3, dilation=6, pads=(6, 6, 6, 6)), 8),
    "planes": (window_conv(1, 3, 8, 9, 14, 3, 3, dilation=2, pads=(1, 2, 3, 2)), 16),
    "stem_stride2": (window_conv(1, 3, 16, 23, 23, 7, 7, pads=(3, 3, 3, 3), stride=2), 8),
    "asymmetric": (window_conv(1, 3, 8, 8, 19, 2, 3, pads=(0, 2, 1, 0)), 8),
}


@pytest.mark.parametrize("name", list(CASES))
def test_skipped_taps_read_only_padding(name: str) -> None:
    """Brute force over every stored position of every panel: a tap outside the live
    ranges never reads inside the input."""
    c, load, d = _direct(*CASES[name])
    taps = live_taps(c, load, d)
    if taps is None:
        return
    assert len(taps) == math.prod(e for _, e, _ in d.outer) * d.line_panels
    names = [a.name for a in c.reduce_axes]
    for panel, ranges in enumerate(taps):
        positions = _stored(c, d, panel)
        for r in itertools.product(*(range(a.extent) for a in c.reduce_axes)):
            if all(lo <= v <= hi for v, (lo, hi) in zip(r, ranges, strict=True)):
                continue
            taps_at = dict(zip(names, r, strict=True))
            assert not any(_reads_inside(c, load, {**at, **taps_at}) for at in positions), (panel, r)


def test_a_dilated_convolutions_border_rows_skip_their_outer_tap_rows() -> None:
    """Rate 18 on a 32 x 32 map: 14 of the 32 output rows read inside the input with the
    first tap row, 14 with the last; panels of 8 positions skip the column taps likewise."""
    c, load, d = _direct(window_conv(1, 64, 64, 32, 32, 3, 3, dilation=18, pads=(18, 18, 18, 18)), 16)
    assert d.side == "a" and d.panel == 8  # narrow panels: the model prices what they skip
    assert live_fraction(c, live_taps(c, load, d)) == pytest.approx((60 / 96) * (8 / 12))


def test_no_padding_skips_nothing() -> None:
    c, load, d = _direct(window_conv(1, 6, 8, 9, 35, 3, 3, pads=None), 8)
    assert live_taps(c, load, d) is None


@pytest.mark.parametrize("name", list(CASES))
def test_the_copy_holds_every_read_of_a_live_tap(name: str) -> None:
    """The padded copy's box (compiler/schedule/in_place.py), cut to the input along the
    dimensions a panel reads at one index (a line's rows), holds every element any live
    tap reads at any stored position: what it drops only skipped taps read."""
    c, load, d = _direct(*CASES[name])
    taps = live_taps(c, load, d)
    full = tuple((0, a.extent - 1) for a in c.reduce_axes)
    names = [a.name for a in c.reduce_axes]
    for panel in range(math.prod(e for _, e, _ in d.outer) * d.line_panels):
        ranges = full if taps is None else taps[panel]
        for r in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges)):
            for at in _stored(c, d, panel):
                values = {**at, **dict(zip(names, r, strict=True))}
                for index, lo, extent in zip(load.indices, d.lo, d.extents, strict=True):
                    form = linear_form(index)
                    assert form is not None
                    v = form[0] + sum(k * values.get(n, 0) for n, k in form[1].items())
                    assert lo <= v < lo + extent, (panel, r, at)


def test_a_dilated_convolutions_copy_has_no_padding_rows() -> None:
    """Rate 18 on a 32 x 32 map, lines of one output row: the copy is the input's 32 rows
    (it was 68: a tap row that leaves the input is skipped by the whole line), and its
    columns keep their padding (a line's positions read across them)."""
    _, _, d = _direct(window_conv(1, 64, 64, 32, 32, 3, 3, dilation=18, pads=(18, 18, 18, 18)), 16)
    assert d.fold is None and d.copied
    assert (d.lo[-2], d.extents[-2]) == (0, 32)
    assert (d.lo[-1], d.extents[-1]) == (-18, 68)
