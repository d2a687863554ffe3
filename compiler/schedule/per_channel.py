"""How a per-channel (depthwise) convolution runs on the CPU: plane by plane
(compiler/schedule/plane_conv.py), with channels in the vector lanes
(compiler/schedule/lane_conv.py), or on the general micro-tiles. The model ranks the
three; the pipeline times the others beside its pick where the compilation measures
(compiler/schedule/cpu_tile.py `cpu_tile_variants`). The decision rides in the tile's
`plane` field."""

from __future__ import annotations

import math
from collections.abc import Collection

from compiler.ir.te import Compute
from compiler.schedule.lane_conv import LaneConv, lane_conv, lane_cost
from compiler.schedule.plane_conv import PlaneConv, micro_tile_cost, plane_conv, plane_cost

PerChannel = PlaneConv | LaneConv


def per_channel_choices(c: Compute, vector: int, lanes: int, l1_bytes: int,
                        constant_inputs: Collection[int] = ()) -> list[tuple[float, PerChannel | None]]:
    """The ways to compute `c`, cheapest first by the model, each with its cost relative to
    the cheapest: planes, channels in lanes (their taps packed at load where
    `constant_inputs`, the positions of weights, hold them) and micro-tiles of the tile's
    `vector` (None); only micro-tiles where `c` cannot take planes. Planes win a tie."""
    p = plane_conv(c, lanes)
    if p is None:
        return [(1.0, None)]
    taps = math.prod(a.extent for a in c.reduce_axes)
    ways: list[tuple[float, PerChannel | None]] = [(plane_cost(p, taps, l1_bytes), p)]
    lc = lane_conv(p, p.taps in constant_inputs)
    if lc is not None:
        ways.append((lane_cost(lc), lc))
    ways.append((micro_tile_cost(p, taps, vector), None))
    ways.sort(key=lambda way: way[0])
    cheapest = ways[0][0]
    return [(cost / cheapest if cheapest > 0 else 1.0, way) for cost, way in ways]


def planned_per_channel(c: Compute, vector: int, lanes: int, l1_bytes: int,
                        constant_inputs: Collection[int] = ()) -> PerChannel | None:
    """The model's way to run `c` on a target of `lanes` lanes and an L1 of `l1_bytes`
    (None: micro-tiles of the tile's `vector`); `constant_inputs` as for `per_channel_choices`."""
    return per_channel_choices(c, vector, lanes, l1_bytes, constant_inputs)[0][1]


def per_channel_from_json(j: dict) -> PerChannel:
    """A tile's per-channel layout read back: a `LaneConv` (the only one with a `channel`
    field) or a `PlaneConv`."""
    return LaneConv.from_json(j) if "channel" in j else PlaneConv.from_json(j)
