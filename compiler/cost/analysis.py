"""The TE analyses (region, footprint, traffic, tile count) of one Compute, memoised by tile.

Every number the cost model and the tile constructor use comes from
`compiler.ir.te`; this class only names tiles by their per-axis sizes and
remembers answers, because construction asks about the same tiles many times.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from compiler.ir import te
from compiler.ir.affine import in_bounds_points
from compiler.ir.dtypes import dtype

Sizes = tuple[int, ...]


def live_loads(e: te.Expr) -> Counter[int]:
    """Per input, the loads one evaluation of `e` makes: a select by the output index
    alone (no load in its condition) makes its larger branch's, as the C kernels run each
    range of such a select with its own branch (compiler/codegen/c/kernel.py
    `_pieces`): Winograd's transforms select one of 36 weighted sums of 4 values.
    Without recursion (a Concat of many parts is a select chain as deep)."""
    counts: dict[int, Counter[int]] = {}
    stack: list[tuple[te.Expr, bool]] = [(e, False)]
    while stack:
        x, ready = stack.pop()
        if id(x) in counts:
            continue
        kids = te.children(x)
        if not ready:
            stack.append((x, True))
            stack.extend((k, False) for k in kids)
            continue
        if isinstance(x, te.Call) and x.op == "select" and not any(
                isinstance(y, te.Load) for y in te.walk(x.args[0])):
            a, b = counts[id(x.args[1])], counts[id(x.args[2])]
            total = Counter({i: max(a[i], b[i]) for i in a.keys() | b.keys()})
        else:
            total = Counter({x.input: 1}) if isinstance(x, te.Load) else Counter()
            for k in kids:
                total.update(counts[id(k)])
        counts[id(x)] = total
    return counts[id(e)]


class TileAnalysis:
    """Region / footprint / traffic of `compute` for tiles given as sizes per axis.

    `spatial` sizes follow `compute.axes`; `reduce` sizes follow
    `compute.reduce_axes`, and `None` means the whole reduction (what one
    output tile reads over its lifetime).

    An input's region is capped by the elements its loads can touch (one per
    load per iteration point): a data-dependent index (gather) has a region of
    the whole tensor, but a tile of 8 rows reads 8 rows of it, not all.
    """

    def __init__(self, compute: te.Compute) -> None:
        self.compute = compute
        self.extents: Sizes = tuple(a.extent for a in compute.axes)
        self.reduce_extents: Sizes = tuple(a.extent for a in compute.reduce_axes)
        self.out_bytes = dtype(compute.dtype).nbytes
        self.in_bytes = tuple(dtype(t.dtype).nbytes for t in compute.inputs)
        body = live_loads(compute.body)
        post = Counter() if compute.post is None else live_loads(compute.post)
        self._body_loads = [body[i] for i in range(len(compute.inputs))]
        self._post_loads = [post[i] for i in range(len(compute.inputs))]
        # inputs only the epilogue reads (a residual, a bias): once per output, not per reduce step
        self.post_only = tuple(i for i, (b, p) in enumerate(zip(self._body_loads, self._post_loads, strict=True))
                               if p and not b)
        self._memo: dict[tuple, object] = {}

    def tile(self, spatial: Sequence[int], reduce: Sequence[int] | None = None) -> te.Tile:
        """The te.Tile of these sizes (reduce None = full reduce extents)."""
        sizes = {a.name: s for a, s in zip(self.compute.axes, spatial, strict=True)}
        if reduce is not None:
            sizes |= {a.name: s for a, s in zip(self.compute.reduce_axes, reduce, strict=True)}
        return te.Tile(sizes)

    def _cached(self, key: tuple, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def _outputs(self, spatial: Sequence[int]) -> int:
        return math.prod(min(s, e) for s, e in zip(spatial, self.extents, strict=True))

    def _touch_caps(self, spatial: Sequence[int], reduce: Sequence[int] | None) -> list[int]:
        """Per input, the most elements its loads can touch over the tile's iteration points."""
        outputs = self._outputs(spatial)
        sizes = self.reduce_extents if reduce is None else reduce
        points = outputs * math.prod(min(r, e) for r, e in zip(sizes, self.reduce_extents,
                                                                strict=True))
        return [b * points + p * outputs for b, p in zip(self._body_loads, self._post_loads,
                                                         strict=True)]

    def regions(self, spatial: Sequence[int],
                reduce: Sequence[int] | None = None) -> list[list[te.Interval]]:
        """te.region_of: per input, the box of elements one tile reads."""
        key = ("rg", tuple(spatial), None if reduce is None else tuple(reduce))
        return self._cached(key, lambda: te.region_of(self.compute, self.tile(spatial, reduce)))

    def region_extents(self, spatial: Sequence[int],
                       reduce: Sequence[int] | None = None) -> list[list[int]]:
        """Per input, the extent of each dim of the box one tile reads."""
        return [[max(0, hi - lo + 1) for lo, hi in box] for box in self.regions(spatial, reduce)]

    def input_elems(self, spatial: Sequence[int], reduce: Sequence[int] | None = None) -> list[int]:
        """Per input, the elements of its region a tile holds (capped by what its loads touch)."""
        key = ("el", tuple(spatial), None if reduce is None else tuple(reduce))
        return self._cached(key, lambda: [
            min(math.prod(ext), cap) for ext, cap in zip(
                self.region_extents(spatial, reduce), self._touch_caps(spatial, reduce), strict=True)])

    def input_bytes(self, spatial: Sequence[int], reduce: Sequence[int] | None = None) -> int:
        """Bytes of the input regions a tile holds (each capped by what its loads touch)."""
        return sum(n * nb for n, nb in zip(self.input_elems(spatial, reduce), self.in_bytes,
                                           strict=True))

    def output_bytes(self, spatial: Sequence[int]) -> int:
        """Bytes of the output tile (sizes clipped to the extents)."""
        return self._outputs(spatial) * self.out_bytes

    def footprint(self, spatial: Sequence[int], reduce: Sequence[int] | None = None) -> int:
        """Bytes a tile holds at one level: its input regions plus its output tile (te.footprint,
        with the touch cap)."""
        return self.input_bytes(spatial, reduce) + self.output_bytes(spatial)

    def input_traffic(self, spatial: Sequence[int], transaction: int,
                      reduce: Sequence[int] | None = None, inputs: Sequence[int] | None = None) -> int:
        """Whole-transaction bytes one tile reads (te.box_bytes of each input region; a
        capped input costs at most one transaction per touched element), of `inputs`'
        positions only where given."""
        wanted = range(len(self.compute.inputs)) if inputs is None else inputs
        key = ("it", tuple(spatial), transaction, None if reduce is None else tuple(reduce), tuple(wanted))

        def measure() -> int:
            caps = self._touch_caps(spatial, reduce)
            boxes = self.regions(spatial, reduce)
            return sum(min(te.box_bytes(t.shape, box, nb, transaction),
                           cap * -(-nb // transaction) * transaction)
                       for i, (t, box, cap, nb) in enumerate(zip(self.compute.inputs, boxes, caps,
                                                                 self.in_bytes, strict=True))
                       if i in wanted)

        return self._cached(key, measure)

    def traffic(self, spatial: Sequence[int], transaction: int,
                reduce: Sequence[int] | None = None) -> te.Traffic:
        """te.traffic with the touch cap: the inputs a tile reads and the output tile it
        writes, in whole transactions, and the tile count."""
        key = ("tr", tuple(spatial), transaction, None if reduce is None else tuple(reduce))

        def measure() -> te.Traffic:
            out_box = [self.tile(spatial).interval(a) for a in self.compute.axes]
            written = te.box_bytes(self.extents, out_box, self.out_bytes, transaction)
            return te.Traffic(self.input_traffic(spatial, transaction, reduce) + written,
                              self.tiles(spatial))

        return self._cached(key, measure)

    def tiles(self, spatial: Sequence[int]) -> int:
        """te.num_tiles: tiles covering the spatial index space."""
        return te.num_tiles(self.compute, self.tile(spatial))

    def compulsory(self, transaction: int) -> int:
        """Bytes moved by one tile covering everything: each input read once, the output written once."""
        return self.traffic(self.extents, transaction).per_tile

    def flops(self) -> int:
        """The Compute's FLOP estimate (memoised: it walks the body)."""
        return self._cached(("flops",), self.compute.flops)

    def useful_flops(self) -> int:
        """`flops` without the reduction's points whose padded loads fall outside their
        tensors (a convolution's taps on its padding, which its kernel skips: a roofline
        against all of them put ASPP's dilated convolutions at 169% of the FMA peak)."""
        return self._cached(("useful_flops",), self._useful_flops)

    def _useful_flops(self) -> int:
        c = self.compute
        points = None if c.stages or not c.is_reduction else in_bounds_points(c)
        return self.flops() if points is None else c.flops(points)
