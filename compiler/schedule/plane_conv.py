"""Per-channel convolutions computed plane by plane (`PlaneConv`): where a depthwise
convolution (each output plane reads one input plane and taps of its own) takes this
path rather than register micro-tiles, and how its planes are laid out. The decision
rides in the kernel's `TileConfig.plane`; compiler/codegen/c/plane.py renders it.

Micro-tiles put SIMD lanes along an output row: a 7- or 14-wide row fills 7 / 16 or
14 / 16 of an AVX-512 vector, or one lane where the tile's vector is a single element,
and a stride-2 row reads every other element. MobileNet's depthwise convolutions on
14 x 14 and 7 x 7 maps with hundreds of channels ran at 0.5-0.65x onnxruntime (0.15x
with stride 2). Here each task copies one input plane into scratch, padded to the
windows' reach, so every read is in bounds, and split by stride phase (row y, column x
go to phase (y mod sh, x mod sw) at (y div sh, x div sw)), so that consecutive output
positions read consecutive elements whatever the stride or dilation. The output plane
is then one line of positions at the phase plane's row period, (OH - 1) x Wq + OW of
them (the positions between a row's end and the next row's start are computed and
dropped), walked in whole vectors: for each tap, one broadcast and one unaligned
load per vector of outputs. The cost (`plane_cost` against `micro_tile_cost`) counts
vector multiply-adds, dropped lanes included, so wide maps, whose rows already fill
the vectors, stay on micro-tiles (both paths copy the padded input once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.ir.affine import form_bounds, linear_form, row_major_strides
from compiler.ir.contraction import plain_load
from compiler.ir.te import Call, Compute, Load
from compiler.schedule.plan_json import as_json, tuples

PLANE_LANES = (4, 8, 16)  # float32 lanes of SSE / NEON, AVX2, AVX-512: the renderings there are
MAX_PLANE_FLOATS = 1 << 16  # a thread's scratch stays within L2 beside the other thread's
# Measured per unit of cost, one thread (ns per vector multiply-add): micro-tiles of one
# vector a row 2.7 (3x3 and 5x5 windows on 14 x 14), of seven 0.76 (112 x 112); planes 0.5-0.65
# inside L1, 0.83 beyond (112 x 112). Each micro-tile row costs about this many vectors more:
ROW_OVERHEAD = 1.5
# A plane whose copy and line outgrow half of L1 (the other half holds the next plane's copy,
# being filled, and the input and output rows streaming through) costs this much more per
# vector. Measured, one thread, AVX-512, planes against micro-tiles: 3x3 stride 2 on 112 x 112
# (64 and 96 channels) 238 / 207 and 361 / 309 us, stride 1 on 56 x 56 (128 and 144 channels)
# 187 / 179 and 213 / 179 us; inside, planes still win (56 x 56 stride 2, 28 x 28, 14 x 14).
L1_SPILL = 3.0


@dataclass(frozen=True)
class PlaneConv:
    """Input `data` read one plane at a time through a padded, phase-split copy; input
    `taps` holds each plane's filter taps. Output axes other than the last two walk the
    planes (`plane_axes`); the last two are the plane's rows and columns."""

    data: int
    taps: int
    lanes: int
    plane_axes: tuple[tuple[int, int, int, int], ...]  # (position, extent, data step, taps step)
    data_base: int  # data offset of plane 0's element (0, 0)
    taps_base: int
    in_plane: tuple[int, int]  # the input plane's rows, columns (the last two dims)
    lo: tuple[int, int]  # input row and column of the copy's element (0, 0)
    reach: tuple[int, int]  # rows and columns the windows reach
    phases: tuple[int, int]  # row and column strides: the copy is split by phase
    pad_value: float
    koff: tuple[int, ...]  # per flat reduce index: offset in the copy
    toff: tuple[int, ...]  # per flat reduce index: offset of its tap from the taps base
    out_plane: tuple[int, int]  # output rows, columns

    @property
    def quarter(self) -> tuple[int, int]:
        """Rows and columns of one phase plane."""
        return -(-self.reach[0] // self.phases[0]), -(-self.reach[1] // self.phases[1])

    @property
    def positions(self) -> int:
        """Output positions computed per plane: rows at the phase plane's period."""
        return (self.out_plane[0] - 1) * self.quarter[1] + self.out_plane[1]

    @property
    def vectors(self) -> int:
        return -(-self.positions // self.lanes)

    @property
    def copy_floats(self) -> int:
        """The scratch copy: every phase plane, and the slack the last vectors read past it."""
        planes = self.phases[0] * self.phases[1] * math.prod(self.quarter)
        return _round16(max(planes, max(self.koff) + self.vectors * self.lanes))

    @property
    def scratch_floats(self) -> int:
        """A thread's scratch: two copies (one computed, the next filled) and the line."""
        return 2 * self.copy_floats + self.vectors * self.lanes

    def to_json(self) -> dict:
        return as_json(self)

    @staticmethod
    def from_json(j: dict) -> PlaneConv:
        return PlaneConv(**{k: tuples(v) for k, v in j.items()})


def _round16(n: int) -> int:
    return -(-n // 16) * 16


def plane_conv(c: Compute, lanes: int) -> PlaneConv | None:
    """How `c` is computed plane by plane on a target of `lanes` float32 lanes, or None
    where it is not a float32 per-plane convolution or the layout does not fit."""
    body = c.body
    if (c.dtype != "float32" or c.reduce_op != "sum" or lanes not in PLANE_LANES or len(c.axes) < 3
            or not (isinstance(body, Call) and body.op == "mul")):
        return None
    loads = [plain_load(e) for e in body.args]
    if any(ld is None or ld.dtype != "float32" for ld in loads):
        return None
    h, w = (a.name for a in c.axes[-2:])
    data, taps = sorted(loads, key=lambda ld: not ({h, w} & _names(ld)))  # type: ignore[arg-type]
    if {h, w} & _names(taps) or taps.pad is not None or data.input == taps.input:
        return None
    return _layout(c, data, taps, lanes)


def _names(ld: Load) -> set[str]:
    return {v for i in ld.indices if (f := linear_form(i)) is not None for v in f[1]}


def _layout(c: Compute, data: Load, taps: Load, lanes: int) -> PlaneConv | None:
    """The plane layout of `data` (rows, columns its last two dims) and `taps`, or None
    where their indices do not have the per-plane form."""
    forms = [linear_form(i) for i in data.indices]
    tforms = [linear_form(i) for i in taps.indices]
    if any(f is None for f in (*forms, *tforms)) or len(forms) < 2:
        return None
    h, w = (a.name for a in c.axes[-2:])
    plane_names = {a.name for a in c.axes[:-2]}
    reduce_names = {a.name for a in c.reduce_axes}
    ranges = {a.name: (0, a.extent - 1) for a in c.all_axes()}
    shape, tshape = c.inputs[data.input].shape, c.inputs[taps.input].shape
    (cy, ry), (cx, rx) = forms[-2], forms[-1]  # type: ignore[misc]
    sh, sw = ry.get(h, 0), rx.get(w, 0)
    if sh < 1 or sw < 1 or set(ry) - reduce_names - {h} or set(rx) - reduce_names - {w}:
        return None
    (ylo, yhi), (xlo, xhi) = (form_bounds(f, ranges) for f in forms[-2:])  # type: ignore[arg-type]
    if data.pad is None and (min(ylo, xlo) < 0 or yhi >= shape[-2] or xhi >= shape[-1]):
        return None
    # the leading dims pick the plane: they move with the plane axes alone, inside the tensor
    lead = forms[:-2]
    fixed = plane_names | {r for r in reduce_names if ranges[r][1] == 0}
    if any(set(f[1]) - fixed or not 0 <= form_bounds(f, ranges)[0] <= form_bounds(f, ranges)[1] < n  # type: ignore[index,arg-type]
           for f, n in zip(lead, shape[:-2], strict=True)):
        return None
    strides, tstrides = row_major_strides(shape), row_major_strides(tshape)

    def step(fs: list, st: list[int], name: str) -> int:
        return sum(f[1].get(name, 0) * s for f, s in zip(fs, st, strict=True))
    plane_axes = tuple((d, a.extent, step(lead, strides[:-2], a.name), step(tforms, tstrides, a.name))
                       for d, a in enumerate(c.axes[:-2]) if a.extent > 1)
    koff, toff = [], []
    quarter_rows, quarter_cols = -(-(yhi - ylo + 1) // sh), -(-(xhi - xlo + 1) // sw)
    for k in _flat_reduce(c):
        y = cy + sum(ry.get(n, 0) * v for n, v in k.items()) - ylo
        x = cx + sum(rx.get(n, 0) * v for n, v in k.items()) - xlo
        koff.append(((y % sh) * sw + x % sw) * quarter_rows * quarter_cols + (y // sh) * quarter_cols + x // sw)
        toff.append(sum(step(tforms, tstrides, n) * v for n, v in k.items()))
    plane = PlaneConv(data.input, taps.input, lanes, plane_axes,
                      sum(f[0] * s for f, s in zip(lead, strides[:-2], strict=True)),  # type: ignore[index]
                      sum(f[0] * s for f, s in zip(tforms, tstrides, strict=True)),  # type: ignore[index]
                      (shape[-2], shape[-1]), (ylo, xlo), (yhi - ylo + 1, xhi - xlo + 1), (sh, sw),
                      float(data.pad) if data.pad is not None else 0.0, tuple(koff),
                      tuple(toff), (c.axes[-2].extent, c.axes[-1].extent))
    return plane if plane.scratch_floats <= MAX_PLANE_FLOATS else None


def _flat_reduce(c: Compute) -> list[dict[str, int]]:
    """Every reduce index, row-major, as {axis name: value}."""
    points: list[dict[str, int]] = [{}]
    for a in c.reduce_axes:
        points = [{**p, a.name: v} for p in points for v in range(a.extent)]
    return points


def plane_cost(p: PlaneConv, taps: int, l1_bytes: int) -> float:
    """One plane's vector multiply-adds: every computed vector, for every tap; dearer by
    L1_SPILL where the copy and the line outgrow half of L1."""
    spill = L1_SPILL if 4 * (p.copy_floats + p.vectors * p.lanes) > l1_bytes // 2 else 1.0
    return p.vectors * taps * spill


def micro_tile_cost(p: PlaneConv, taps: int, vector: int) -> float:
    """The same plane on micro-tiles whose rows are `vector` elements wide (the tile's
    vector; a row of the plane is cut into whole vectors of the target's lanes), each row
    ROW_OVERHEAD vectors' worth dearer."""
    cols = p.out_plane[1]
    per_row = -(-cols // p.lanes) if vector > 1 else cols  # one element a multiply-add without
    stride_loads = 2 if p.phases[1] > 1 else 1  # a stride-2 vector: two loads and a shuffle
    return p.out_plane[0] * (per_row * stride_loads + ROW_OVERHEAD) * taps
