"""Per-channel convolutions with channels in the vector lanes (`LaneConv`): the other way
to run a depthwise convolution that `PlaneConv` lays out (compiler/schedule/plane_conv.py
finds the inputs, taps and windows; this re-lays them), rendered by
compiler/codegen/c/lanes.py.

The plane path walks one channel's output positions in vectors: on a small map most of a
vector's lanes compute positions between rows that are then dropped (a 14 x 14 map at
the copy's row period of 20 computes 274 positions for 196), and every tap is an
unaligned load, split across two cache lines for 15 of every 16 taps on AVX-512. A
7 x 7 depthwise convolution of 384 channels on 14 x 14 ran at 0.45x onnxruntime on a
Zen 5, whose NCHWc kernels put 16 channels in the lanes. Here a task takes `lanes`
consecutive channels: it transposes their input planes into a padded copy holding, at
each position, the `lanes` channels' values as one vector (two blocks of `lanes` x
`lanes` shuffled per `lanes` positions), computes each output position as one chain of
aligned vector loads times the taps' vectors (no lane is wasted, strides and dilations
only change which positions are read), and transposes the results back into the
output's planes. The transposes cost shuffles the plane path does not pay, so the form
wins where the windows are large against the map (5 x 5 and 7 x 7 taps on 14 x 14 and
7 x 7 maps); `lane_cost` prices both terms in the plane path's units, and the candidates
are timed where the compilation measures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.schedule.plan_json import as_json, tuples
from compiler.schedule.plane_conv import MAX_PLANE_FLOATS, PlaneConv

# In the plane path's unit (`plane_cost`: one vector multiply-add on an unaligned load):
# a multiply-add on an aligned load of the copy, a two-vector shuffle of a transpose, and
# each vector load and store around it. Fitted to both paths timed on one thread of an
# AVX-512 Xeon (us, planes / lanes): 7x7 on 14 x 14 (384 channels) 198 / 94, 3x3 on 14 x 14
# (576) 62 / 57, 3x3 on 7 x 7 (960) 31 / 22, 5x5 stride 2 on 28 x 28 (240) 98 / 73; planes
# keep 3x3 stride 2 on 56 x 56 (144 channels: 104 / 124), where the transposes dominate.
LANE_FMA = 0.45
SHUFFLE = 1.2
MOVE = 0.6


@dataclass(frozen=True)
class LaneConv:
    """Input `data` read `lanes` channels at a time (the plane axis `channel`; where the
    lanes do not divide its extent, the last task's spare lanes repeat its last channel
    and are not stored) through a padded copy of their planes, a vector of the channels at
    each position; input `taps` holds each channel's filter taps. `outer_axes`: the
    other plane axes, each (position, extent, data step, taps step), as `channel` is.
    `packed_taps`: the taps (a weight, the same for every outer plane) come packed at load,
    each task's `lanes` channels' taps one vector a tap (`packed_taps_floats` in all), so
    that a task reads them instead of gathering them."""

    data: int
    taps: int
    lanes: int
    outer_axes: tuple[tuple[int, int, int, int], ...]
    channel: tuple[int, int, int, int]
    data_base: int  # data offset of channel 0's element (0, 0)
    taps_base: int
    in_plane: tuple[int, int]  # the input plane's rows, columns
    lo: tuple[int, int]  # input row and column of the copy's position (0, 0)
    reach: tuple[int, int]  # the copy's rows and columns
    strides: tuple[int, int]
    pad_value: float
    tap_at: tuple[int, ...]  # per flat reduce index: its copy position for output (0, 0)
    toff: tuple[int, ...]  # per flat reduce index: offset of its tap from the taps base
    out_plane: tuple[int, int]
    packed_taps: bool = False

    @property
    def positions(self) -> int:
        """Output positions a channel has."""
        return self.out_plane[0] * self.out_plane[1]

    @property
    def groups(self) -> int:
        """Tasks: every outer plane and every `lanes` channels."""
        return math.prod(extent for _, extent, _, _ in self.outer_axes) * self.channel_blocks

    @property
    def channel_blocks(self) -> int:
        """Tasks along the channels: `lanes` channels each, the last maybe fewer."""
        return -(-self.channel[1] // self.lanes)

    @property
    def partial(self) -> bool:
        """Whether the last task along the channels has fewer than `lanes`."""
        return self.channel[1] % self.lanes != 0

    @property
    def copy_positions(self) -> int:
        """The copy's positions, and one past them where input positions outside the
        windows' reach are put."""
        return self.reach[0] * self.reach[1] + 1

    @property
    def scratch_floats(self) -> int:
        """A thread's scratch: the copy, the results (in whole transposed blocks) and,
        unless they come packed, the taps, each position or tap a vector."""
        results = -(-self.positions // self.lanes) * self.lanes
        taps = 0 if self.packed_taps else len(self.toff)
        return (self.copy_positions + results + taps) * self.lanes

    @property
    def packed_taps_floats(self) -> int:
        """The taps packed at load: every task's, a vector a tap (a partial task's spare
        lanes repeating its last channel's)."""
        return self.channel_blocks * len(self.toff) * self.lanes

    def to_json(self) -> dict:
        return as_json(self)

    @staticmethod
    def from_json(j: dict) -> LaneConv:
        return LaneConv(**{k: tuples(v) for k, v in j.items()})


def lane_conv(p: PlaneConv, constant_taps: bool = False) -> LaneConv | None:
    """Plane layout `p` re-laid with channels in its lanes, or None where no plane axis
    walks the channels or the scratch would not fit. Taps that are a weight
    (`constant_taps`) and the same for every outer plane are packed at load."""
    if not p.plane_axes:
        return None
    qr, qc = p.quarter
    (sh, sw), cols = p.phases, p.reach[1]
    tap_at = []
    for k in p.koff:  # undo the phase split: row and column in the copy
        phase, rest = divmod(k, qr * qc)
        y, x = rest // qc * sh + phase // sw, rest % qc * sw + phase % sw
        tap_at.append(y * cols + x)
    outer = p.plane_axes[:-1]
    packed = constant_taps and all(taps_step == 0 for _, _, _, taps_step in outer)
    lc = LaneConv(p.data, p.taps, p.lanes, outer, p.plane_axes[-1], p.data_base, p.taps_base,
                  p.in_plane, p.lo, p.reach, p.phases, p.pad_value, tuple(tap_at), p.toff, p.out_plane, packed)
    return lc if lc.scratch_floats <= MAX_PLANE_FLOATS else None


def lane_cost(lc: LaneConv) -> float:
    """One channel's share of a task, in the plane path's units (`plane_cost`): a vector
    multiply-add per output position and tap, and the two transposes, each `lanes`
    positions a block of lanes x log2(lanes) / 2 shuffles, `lanes` loads and stores; the
    spare lanes of a last, partial task are paid for by the channels there are."""
    lanes = lc.lanes
    filled = lc.channel[1] / (lc.channel_blocks * lanes)
    blocks = -(-lc.in_plane[0] * lc.in_plane[1] // lanes) + -(-lc.positions // lanes)
    per_block = lanes * int(math.log2(lanes)) // 2 * SHUFFLE + 2 * lanes * MOVE
    return (lc.positions * len(lc.toff) * LANE_FMA + blocks * per_block) / lanes / filled
