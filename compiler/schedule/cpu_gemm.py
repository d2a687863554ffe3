"""The CPU GEMM's decisions, made when the plan is built (the C backend's tile step):
whether a Compute takes the packed, explicit-SIMD GEMM path, its micro-kernel, its Goto
blocking, which way round it is computed, which operand is read in place and which are
packed once at load. The result, a `GemmBlocking` (compiler/schedule/gemm_blocking.py),
rides in the kernel's `TileConfig`; compiler/codegen/c/gemm.py renders it.

A float32 Compute that `contraction.match_contraction` accepts (matmul, batched
matmul, 1x1 and implicit-GEMM convolution) is computed per batch index as
C[M x N] = A[M x K] B[K x N], A the rows operand, B the cols operand: one task per
(batch, mc rows, nc cols) tile, K walked in kc-deep blocks, an MR x NR micro-kernel
of vector accumulators. A constant operand (a weight) is packed once, at load, into
panels over all of K instead of per call (compiler/schedule/prepack.py places it).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Collection

from compiler.ir.contraction import Contraction, expr_vars, match_contraction, side_extent
from compiler.ir.te import Compute, Load
from compiler.schedule.gemm_blocking import (
    DirectOperand,
    GemmBlocking,
    MicroKernel,
    PackedOperand,
    micro_tails,
)
from compiler.schedule.in_place import PACK_COST, PACK_COST_SCALAR, SCATTER_COST, direct_layout
from compiler.schedule.live_taps import live_fraction, live_taps
from compiler.schedule.merge_axes import merge_axes
from compiler.schedule.plan import TileConfig
from compiler.target.base import Target

SUPPORTED_LANES = (4, 8, 16)  # float32 lanes of SSE / NEON, AVX2, AVX-512
MIN_ROWS = 4  # smaller GEMMs waste most of a micro-kernel on padding
PAD_TOLERANCE = 0.05  # padding rows the fullest micro-kernel may add before a shorter one is used
VARIANT_PAD_TOLERANCE = 0.2  # ... and may add to be timed beside the shorter one (`_row_choices`)
MAX_ROWS = {1: 8, 2: 14, 3: 9, 4: 6}  # per vectors wide: beyond, the code grows for no gain
WIDE_VECTORS = (3, 4)  # wider micro-kernels timed where a map's lines leave few rows (`orientations`)
MIN_TILE_COLS = 256  # column blocks grow to this: A is packed once per column block
MIN_TASKS = 4  # enough tasks to balance the cores, when the tile planned that many
MIN_SPLIT_COLS = 4  # NR panels a column block keeps before rows are split instead
BALANCED = 0.9  # share of the cores' time that a kernel's static tasks must keep busy
# ... and the share a variant blocked to keep them evenly busy keeps (`gemm_variants`): timed
# beside the first where the compilation measures. Narrower blocks balance the cores but
# pack A or B again, which pays on long tasks, not on short ones: GPT-2's QKV projection
# (128 x 768 x 2304, two threads, Zen 4) ran 9 column blocks, 5 and 4 a core (busy 0.9),
# in 2.28 ms; as 18 tasks 2.05 ms. MobileNetV2's convolutions (tasks of 5-20 us), some so
# narrowed after they timed faster alone, ran the model 3% slower at two threads: only
# tasks of EVEN_TASK_FLOPS or more are offered the variant.
EVEN = 0.95
EVEN_TASK_FLOPS = 20e6  # 170 us on a Zen 4 core, 100 on an AVX-512 Xeon's
L2_SHARE = 0.5  # of L2 for a task's A block and C tile (B panels, packing and the rest share the other half)
# Positions read in place as A past the gathered ones' count (`orientations`) where gathering them is timed too
WASTE_TO_GATHER = 0.05
# Accumulators a micro-kernel needs to run at the FMA pipes' rate where the vector registers
# are 16 (AVX2): each k step's FMAs wait on the previous step's into the same register (4-5
# cycles on two pipes: 8 to 10 in flight) and share that step's broadcasts and loads. Fewer
# are priced as fewer FMAs a cycle (`fma_rate`). There the positions read in place as A get
# 4 or 5 rows x 2 vectors, which the model, counting FMAs alone, ranked first for most of
# ResNet-50's convolutions; timed, they lost to 6 x 2 on gathered panels, by 1.1-1.4x (Zen 2;
# 1.2-1.7x on Zen 3). Not where they are 32 (AVX-512): there an 8 x 1 kernel read in place
# as A (8 accumulators) timed fastest for a 16-channel 1x1 convolution (Sapphire Rapids).
FULL_ACCUMULATORS = 12
# A computed rows operand at most this share of the columns' (per k) is packed per call as
# a weight (`_weights_side`): MBConv's scaled 144 -> 24 projection on 56 x 56 is 24 rows
# against 3136 positions (the frontend folds a scale into weights 1/64 of the map or less:
# compiler/frontend/fusion.py SCALED_WEIGHTS_SHARE).
WEIGHTS_SHARE = 16
MIN_KC = 64  # shallower blocks spend more on loading and storing C than on FMAs
DEFAULT_CACHE_BYTES = {"l1": 32 << 10, "l2": 512 << 10}
MAX_SCRATCH_BYTES = 2 << 20
C_TILE_L2_PARTS = 4  # a convolution's C tile is at most this share of L2 (`gemm_blocking`)


@dataclasses.dataclass(frozen=True)
class Orientation:
    """One way to compute a contraction (`orientations`): its sides, micro-kernel and the
    operand read in place, with the model's cost in multiply-adds' worth."""

    cost: float
    contraction: Contraction
    micro: MicroKernel
    direct: DirectOperand | None


def with_gemm_blocking(compute: Compute, tile: TileConfig, target: Target,
                       constant_inputs: Collection[int] = ()) -> TileConfig:
    """`tile` with its GEMM blocking decided (`tile.gemm`), or with none where `compute`
    does not take the packed GEMM path on `target` (empty, a row group, not a float32
    contraction the micro-kernels fit). `constant_inputs`: input positions holding
    weights, which may be packed once at load."""
    merged = _merged_contraction(compute, tile, target)
    if merged is None:
        return dataclasses.replace(tile, gemm=None)
    c, m, merged_tile = merged
    return dataclasses.replace(tile, gemm=gemm_blocking(c, m, merged_tile, target, constant_inputs))


def gemm_variants(compute: Compute, tile: TileConfig, target: Target,
                  constant_inputs: Collection[int] = ()) -> list[tuple[float, TileConfig]]:
    """`tile` with the GEMM blocking of each orientation of `compute` (`orientations`),
    the model's cheapest first, each with its cost relative to that one, and after the
    first its blocking for cores kept EVEN busy where that differs and its tasks are long
    (the model prices them alike); empty where `compute` does not take the packed GEMM
    path. The model ranks them; where the device is present, measuring them decides (a
    host whose registers the model reads wrong still gets its fastest: AVX2's 16 give the
    swapped orientation micro-kernels of 4 or 5 rows, slower than gathering the patches on
    an AMD Zen 3)."""
    merged = _merged_contraction(compute, tile, target)
    if merged is None:
        return []
    c, m, merged_tile = merged
    ways = orientations(c, m, target, constant_inputs)
    variants = [(way.cost / ways[0].cost if ways[0].cost > 0 else 1.0,
                 dataclasses.replace(tile, gemm=gemm_blocking(c, m, merged_tile, target, constant_inputs, way)))
                for way in ways]
    # Positions read in place as B store each block of C as soon as it is done (c/gemm.py
    # `_block_epilogue`): on an Intel Xeon a small-K convolution's stores then ran among its
    # FMAs (the stem 0.304 -> 0.258 ms), while on a Zen 4 storing a 1x1 convolution's blocks
    # as computed had lost 3-28% to storing the tile after its last K block. Both are timed
    # (the first such way's twin, priced alike; unmeasured, block stores stay).
    twin = next((i for i, (_, t) in enumerate(variants)
                 if t.gemm is not None and t.gemm.direct is not None and t.gemm.direct.side == "b"), None)
    if twin is not None:
        relative, t = variants[twin]
        assert t.gemm is not None
        variants.insert(twin + 1, (relative, dataclasses.replace(t, gemm=dataclasses.replace(t.gemm, tile_stores=True))))
    first = variants[0][1].gemm
    assert first is not None
    if 2 * first.batch * first.m * first.n * first.k / first.tasks >= EVEN_TASK_FLOPS:
        even = gemm_blocking(c, m, merged_tile, target, constant_inputs, ways[0], balanced=EVEN)
        if even != first:
            variants.insert(1, (1.0, dataclasses.replace(tile, gemm=even)))
    return variants


def _merged_contraction(compute: Compute, tile: TileConfig, target: Target
                        ) -> tuple[Compute, Contraction, TileConfig] | None:
    """`compute` and `tile` with their axes merged (merge_axes) and the contraction the
    packed GEMM path computes, or None where it does not take that path."""
    if math.prod(compute.shape) == 0 or compute.stages:
        return None
    merged, merged_tile = merge_axes(compute, tile)
    m = gemm_contraction(merged, target)
    return None if m is None else (merged, m, merged_tile)


def gemm_contraction(c: Compute, target: Target) -> Contraction | None:
    """The contraction when the packed SIMD path can compute `c` on `target`, else None."""
    if target.lanes not in SUPPORTED_LANES or c.dtype != "float32" or c.acc_dtype != "float32":
        return None
    m = match_contraction(c)
    if m is None or not all(isinstance(e, Load) and e.dtype == "float32" for e in (m.lhs, m.rhs)):
        return None
    if side_extent(c, m.rows) < MIN_ROWS or side_extent(c, m.cols) < target.lanes:
        return None
    return m


def micro_kernel(c: Compute, m: Contraction, target: Target) -> MicroKernel:
    """The register tile of the GEMM, built from the hardware (Roller's alignment at the
    register level) and the GEMM's extents rather than searched.

    Two vectors of `target.lanes` wide wherever N holds two (per k, two B loads feed
    2 x MR FMAs; one vector needs a load per FMA), one otherwise; the last column panel
    runs a narrower kernel where N leaves it part empty (`micro_tails`). Rows: as many
    as the target's vector registers hold beside the B vectors and one broadcast (at
    most MAX_ROWS): fewer rows would reload B for too few FMAs. Where that pads M by
    more than PAD_TOLERANCE beyond the least padding a row count (down to half as many,
    or M itself) gives, the most rows within PAD_TOLERANCE of that least are taken: M = 32
    runs as 3 x 11 rows, not 3 x 14 with a quarter of the FMAs on padding nor 4 x 8 with
    fewer FMAs per load; M = 64 as 5 x 13, not 5 x 14 (70) nor 8 x 8; batch-8 inference as
    one 8-row panel. One thread, Intel Xeon (AVX-512), old and new alternating: the 3x3
    stride-2 stem 3 -> 32 channels on 256 x 256, 8 -> 11 rows, 0.394 -> 0.375 ms; 3x3
    stride-2 32 -> 64 on 128 x 128, 14 -> 13 rows, 1.168 -> 1.146 ms.
    (The rTile's thread tile used to pick the width: on a 14 x 14 feature map it
    holds at most 14 columns, so ResNet's 14 x 14 1x1 convolutions ran one vector
    wide, 491 against 421 us with two.)
    """
    lanes = target.lanes
    vectors = 2 if side_extent(c, m.cols) >= 2 * lanes else 1
    most = _most_rows(vectors, target)
    big_m = side_extent(c, m.rows)

    def padded(r: int) -> int:
        return -(-big_m // r) * r
    counts = range(max(MIN_ROWS, min(most // 2, big_m)), most + 1)
    fewest = min(padded(r) for r in counts)
    rows = max(r for r in counts if padded(r) <= (1 + PAD_TOLERANCE) * fewest)
    return MicroKernel(lanes, rows, vectors)


def _row_choices(mk: MicroKernel, big_m: int, target: Target) -> list[MicroKernel]:
    """`mk`, and where it has fewer rows than the registers hold (`micro_kernel` spared
    M's padding), the fullest too: the model counts the padding's FMAs, not what more
    rows save (B loaded once per more FMAs, fewer C tiles), which measuring weighs (a
    3x3 stride-2 convolution to 64 channels on AVX-512: 8 rows 718 us, 14 rows 663),
    where they pad M (`big_m`) by at most VARIANT_PAD_TOLERANCE."""
    most = _most_rows(mk.vectors, target)
    if mk.rows >= most or round_up(big_m, most) > (1 + VARIANT_PAD_TOLERANCE) * big_m:
        return [mk]
    return [mk, dataclasses.replace(mk, rows=most)]


def _most_rows(vectors: int, target: Target) -> int:
    """Rows of accumulators the target's vector registers hold beside `vectors` B vectors
    and one broadcast (at most MAX_ROWS)."""
    return min(MAX_ROWS[vectors], (max(target.registers, 16) - vectors - 1) // vectors)


def gemm_blocking(c: Compute, m: Contraction, tile: TileConfig, target: Target,
                  constant_inputs: Collection[int] = (), way: Orientation | None = None,
                  balanced: float = BALANCED) -> GemmBlocking:
    """Block sizes, multiples of the micro-kernel: rows as many as L2 holds (B is packed
    once per row block), columns the tile's grown to MIN_TILE_COLS (A is packed once
    per column block), both split again until the tasks the tile planned exist.
    `constant_inputs` as for `packed_operands`. The contraction may be computed with its
    sides swapped, and an operand read in place: `way`, by default the model's cheapest
    (`orientations`). Blocks narrow until the cores are `balanced` busy (`_balanced_blocks`)."""
    matched = m
    way = way or orientations(c, m, target, constant_inputs)[0]
    m, mk, direct = way.contraction, way.micro, way.direct
    big_m, big_n = side_extent(c, m.rows), side_extent(c, m.cols)
    big_k = math.prod(a.extent for a in c.reduce_axes)
    if direct is not None and direct.side == "a":
        big_m = direct.positions
    elif direct is not None:
        big_n = direct.positions

    block_n = round_up(min(big_n, math.prod(tile.block[d] for d in m.cols)), mk.cols)
    # Goto's blocking: a kc x NR panel of B fills L1, an mc x kc block of A in L2
    # together with the mc x nc tile of C that every micro-kernel call loads and stores
    # (sizing A alone to L2 spilled C: matmul 2048^3 ran at 0.58x onnxruntime, 0.8x now).
    # A weight's panels, packed at load, may fill all of L1, not half: they stream from
    # memory, the next one prefetched into L2 (compiler/codegen/c/gemm.py), and deeper
    # blocks load and store C half as often (one thread, share of FMA peak: matmul
    # 512^3 0.86 -> 0.94, bert ffn2 0.85 -> 0.90). B packed per call keeps half, and
    # with it the A rows L2 holds beside it (a convolution gathers its patches once).
    prepacked = prepacked_sides(m, constant_inputs)
    l1_share = 1 if "b" in prepacked else 2
    kc = min(big_k, max(MIN_KC, _cache_bytes(target, "l1") // l1_share // (4 * mk.cols)))
    nc = max(block_n, round_up(min(big_n, MIN_TILE_COLS), mk.cols))
    mc = round_up(big_m, mk.rows)  # as many rows as L2 holds: B is packed once per row block
    # With A prepacked and B packed per call (a convolution: weights x patches), each
    # row block packs B again and A is never packed, so rows may fill all of L2: an
    # A block that spills streams from L3 in the micro-kernel's reading order, cheaper
    # than gathering the patches again (ResNet 3x3 conv 256ch 14x14: 3.42 -> 3.02 ms).
    share = 1.0 if prepacked == ("a",) else L2_SHARE
    l2_rows = int(_cache_bytes(target, "l2") * share) // (4 * (kc + nc))
    mc = min(mc, max(mk.rows, l2_rows // mk.rows * mk.rows))
    # Enough tasks for the cores the tile's scale-out planned for: narrower column
    # blocks first (A is the cheaper operand to pack again), then fewer rows.
    planned = min(MIN_TASKS, math.prod(-(-a.extent // b) for a, b in zip(c.axes, tile.block, strict=True)))
    batch = side_extent(c, m.batch)
    while batch * -(-big_m // mc) * -(-big_n // nc) < planned and max(mc // mk.rows, nc // mk.cols) > 1:
        if nc >= MIN_SPLIT_COLS * mk.cols or mc == mk.rows:
            nc = round_up(nc // 2, mk.cols)
        else:
            mc = round_up(mc // 2, mk.rows)
    in_place = direct.side if direct is not None else ""
    per_call = ("a" not in prepacked and in_place != "a", "b" not in prepacked and in_place != "b")
    # With the weights packed at load and the patches gathered or read in place (a
    # convolution), narrower column blocks pack nothing again; a C tile that L2 holds
    # beside the patches' lines is not reloaded from L3 for a second k block and again by
    # the epilogue (one thread, Intel Xeon with 2 MiB of L2, old and new alternating: the
    # 3x3 stride-2 convolution 32 -> 64 channels on 128 x 128, C tile 70 x 4096 -> 70 x
    # 1024, 1.279 -> 1.190 ms; 256 -> 256 on 28 x 28 2.56 -> 2.47; a 1x1 128 -> 128 on
    # 56 x 56 0.814 -> 0.794; 64 -> 64 on 32 x 32, under the share, unchanged). An eighth
    # of L2 narrowed that last one too, and it ran 3% slower.
    c_tile_bytes = _cache_bytes(target, "l2") // C_TILE_L2_PARTS if prepacked == ("a",) else MAX_SCRATCH_BYTES
    # the scratch: the C tile and the blocks packed per call (a weight's come packed at load)
    while (4 * (mc * nc + kc * (mc * per_call[0] + nc * per_call[1])) > MAX_SCRATCH_BYTES
           or 4 * mc * nc > c_tile_bytes) and nc > mk.cols:
        nc = round_up(nc // 2, mk.cols)
    # Tasks are split statically among the cores: a count the cores do not divide leaves
    # some idle at the end (3 tasks on 2 cores ran a 3x3 convolution at 1.38x its one-core
    # speed), so blocks narrow (columns first, then rows, at most 4x as many) to the
    # fewest tasks that keep the cores `balanced` busy, packing the least again.
    mc, nc = _balanced_blocks(batch, (big_m, big_n, big_k), mc, nc, mk, target.units, per_call, balanced)

    def even(total: int, limit: int, quantum: int) -> int:
        """Equal blocks, as many as `limit` needs: a short last block costs nearly a full one."""
        return round_up(-(-total // -(-total // limit)), quantum)
    return GemmBlocking(mk, big_m, big_n, big_k, batch, even(big_m, mc, mk.rows), even(big_n, nc, mk.cols),
                        even(big_k, kc, 1), m is not matched, direct,
                        packed_operands(c, m, mk, (big_m, big_n, big_k, batch), constant_inputs),
                        prefetch_in_place=direct is not None and prefetch_fits(mk, target))


def round_up(x: int, q: int) -> int:
    return -(-x // q) * q


def fma_rate(mk: MicroKernel, target: Target) -> float:
    """Share of the FMA pipes' rate micro-kernel `mk` keeps on `target` (FULL_ACCUMULATORS)."""
    if target.registers > 16:
        return 1.0
    return min(1.0, mk.rows * mk.vectors / FULL_ACCUMULATORS)


def prefetch_fits(mk: MicroKernel, target: Target) -> bool:
    """Whether micro-kernel `mk` can prefetch an operand read in place on `target` without
    losing an accumulator to the stack. Where the vector registers are 16 and it holds all
    FULL_ACCUMULATORS, GCC 12 spilled one once the prefetches' addresses were computed in its
    loop: 10 of the FMAs of the dilated segmenter's stride-2 convolution read and wrote an
    accumulator on the stack each k (a chain through memory), and it ran 5.0 ms read in place
    against 3.2 gathered (one thread, Zen 3)."""
    return target.registers > 16 or mk.rows * mk.vectors < FULL_ACCUMULATORS


def orientations(c: Compute, m: Contraction, target: Target, constant_inputs: Collection[int] = ()
                 ) -> list[Orientation]:
    """The ways contraction `m` of `c` may be computed: the sides, the micro-kernel, the
    operand read in place (schedule/in_place.py), cheapest first by a cost in
    multiply-adds' worth (at the rate the micro-kernel keeps: `fma_rate`).

    Where the rows operand is a constant (a convolution's weights) and the columns
    are patches of an input, these ways compete: gathering the patches into panels
    (the default, and all there is otherwise), reading them in place as B (the
    output positions in the SIMD lanes: needs consecutive positions to read
    consecutive elements), or swapping the sides to read them in place as A (the
    output channels in the lanes, positions broadcast: any stride; outputs stored
    across the channels), or, swapped, gathering them as A where lines that end
    mid-panel make reading in place compute many positions nobody stores."""
    mk = micro_kernel(c, m, target)
    k = math.prod(a.extent for a in c.reduce_axes)
    channels, positions = side_extent(c, m.rows), side_extent(c, m.cols)
    columns = round_up(positions, mk.cols if micro_tails(mk, channels, positions)[1] == 0 else mk.lanes)
    # Per batch index (a grouped convolution's group) the GEMM and its gather run again;
    # the copy of an input read in place is made once for all of them.
    batch = side_extent(c, m.batch)
    micros = _row_choices(mk, channels, target)
    if not (_weights_side(m, constant_inputs, channels, positions) and isinstance(m.rhs, Load)):
        return sorted((Orientation(batch * round_up(channels, r.rows) * columns * k / fma_rate(r, target), m, r,
                                   None) for r in micros), key=lambda o: o.cost)
    inner = next((c.axes[d].extent for d in reversed(m.cols) if c.axes[d].extent > 1), 1)
    pack = PACK_COST if inner >= mk.lanes else PACK_COST_SCALAR  # the gather copies whole vectors of a row
    options = [Orientation(batch * (round_up(channels, r.rows) * columns * k / fma_rate(r, target)
                                    + pack * k * positions), m, r, None) for r in micros]
    # Read in place, the taps that read only padding for a whole panel are skipped
    # (schedule/live_taps.py): narrower panels skip more of a dilated convolution's.
    as_b = direct_layout(c, m.rhs, "b", m.cols, mk.cols, unit_step=True)
    if as_b is not None:
        live = live_fraction(c, live_taps(c, m.rhs, as_b))
        options += [Orientation(batch * round_up(channels, r.rows) * as_b.positions * k * live / fma_rate(r, target)
                                + PACK_COST * as_b.copy_floats, m, r, as_b) for r in micros]
    swapped = Contraction(m.rhs, m.lhs, m.batch, m.cols, m.rows)
    if channels >= target.lanes:
        lanes_mk = micro_kernel(c, swapped, target)
        lanes = round_up(channels, lanes_mk.lanes)
        scatter = SCATTER_COST * channels * positions

        def in_place(vectors: int) -> Orientation | None:
            """Positions read in place as A by a micro-kernel `vectors` wide, its rows a panel."""
            most = _most_rows(vectors, target)
            layouts = [d for rows in range(max(MIN_ROWS, most // 2), most + 1)
                       if (d := direct_layout(c, swapped.lhs, "a", swapped.rows, rows, unit_step=False)) is not None]
            if not layouts:
                return None
            def micro(d: DirectOperand) -> MicroKernel:
                return MicroKernel(lanes_mk.lanes, d.panel, vectors)
            as_a = min(layouts, key=lambda d: (d.positions / fma_rate(micro(d), target), d.positions, -d.panel))
            live = live_fraction(c, live_taps(c, swapped.lhs, as_a))
            return Orientation(batch * (as_a.positions * lanes * k * live / fma_rate(micro(as_a), target) + scatter)
                               + PACK_COST * as_a.copy_floats, swapped, micro(as_a), as_a)
        first = in_place(lanes_mk.vectors)
        if first is not None and first.direct is not None:
            options.append(first)
            # A panel per line of the map: a 7 x 7 map's lines hold 7 positions, so 7 rows,
            # 14 FMAs per 9 loads at two vectors wide. Where the registers hold as many rows
            # wider (AVX-512's 32: 7 x 3 vectors, 21 FMAs per 10 loads), that is timed too,
            # priced no cheaper (the model counts FMAs, not loads; unmeasured, the first
            # stays). A 1024 -> 1024 1x1 convolution on 7 x 7, one thread, Intel Xeon:
            # 684 -> 668 us (7 x 4 does not fit; 5 x 4 timed 671). Wider kernels with fewer
            # rows are offered too where they hold no fewer accumulators: per k, 4 x 4 loads
            # 4 broadcasts and 4 B vectors for 16 FMAs, 8 x 2 8 and 2 (and panels of 4 fit
            # more maps' lines). A 64-channel 3x3 convolution dilated 6 on 32 x 32 (one
            # thread, Zen 4): 8 x 2 606 us, 4 x 4 580.
            if first.micro.rows < _most_rows(lanes_mk.vectors, target):
                options += [dataclasses.replace(way, cost=max(way.cost, first.cost)) for v in WIDE_VECTORS
                            if channels >= v * target.lanes and (way := in_place(v)) is not None
                            and way.micro.rows * v >= first.micro.rows * first.micro.vectors]
            # The positions gathered into panels as A instead, each panel full of real
            # positions where in place the panels run on past every line's end: a 7 x 7
            # map walks 56 positions for 49 in place in panels of 4 (66 in panels of 6),
            # 50 gathered in panels of 5, whose every k feeds more FMAs per broadcast too
            # (ResNet's 512-channel 3x3 convolution on 7 x 7: 3.4 against 4.0 ms in the
            # model's run, Zen 3: the model counts its FMAs and the gather, not what the
            # fuller micro-kernel saves, so it is timed where in place walks WASTE_TO_GATHER more).
            gathered_rows = round_up(positions, lanes_mk.rows)
            if first.direct.positions > (1 + WASTE_TO_GATHER) * gathered_rows:
                options.append(Orientation(batch * (gathered_rows * lanes * k / fma_rate(lanes_mk, target) + scatter
                                                    + PACK_COST_SCALAR * k * positions), swapped, lanes_mk, None))
    return sorted(options, key=lambda o: o.cost)


def _weights_side(m: Contraction, constant_inputs: Collection[int], channels: int, positions: int) -> bool:
    """Whether the rows operand plays a convolution's weights against patches of an input:
    a constant packed at load, or one computed that is small beside the patches
    (WEIGHTS_SHARE), cheap to pack per call (a per-channel scale folded into the weights:
    compiler/frontend/fusion.py `ChannelScaleFolding`); not a product of two activations
    of like size (attention's), whose plans stay the plain ones."""
    sides = prepacked_sides(m, constant_inputs)
    if sides == ("a",):
        return True
    return (not sides and isinstance(m.lhs, Load) and isinstance(m.rhs, Load) and m.lhs.input != m.rhs.input
            and channels * WEIGHTS_SHARE <= positions)


def _balanced_blocks(batch: int, mnk: tuple[int, int, int], mc: int, nc: int, mk: MicroKernel,
                     units: int, per_call: tuple[bool, bool], balanced: float) -> tuple[int, int]:
    """(mc, nc), narrowed where `units` cores would be less than `balanced` busy, idling
    while others finish their tasks; `per_call`: whether A, B are packed per call (each
    task packs its own blocks, so more column blocks pack A again, more row blocks B)."""
    big_m, big_n, big_k = mnk
    row_panels, col_panels = -(-big_m // mk.rows), -(-big_n // mk.cols)

    def sizes(panels: int, per: int) -> list[int]:  # panels of each block
        whole, rest = divmod(panels, per)
        return [per] * whole + [rest] * (rest > 0)

    @functools.cache
    def busy(rp: int, cp: int) -> float:
        """Share of the cores' time spent working: tasks go to the cores in contiguous
        runs of equal counts (OpenMP's static schedule), each costing its panels. (Summed
        through prefix sums, each block size once: a Winograd transform's 5376 row panels
        took 7 s of a compile when every task's size was taken with a min.)"""
        cols = sizes(col_panels, cp)
        work = [r * c for r in sizes(row_panels, rp) for c in cols] * batch
        done = list(itertools.accumulate(work, initial=0))
        share, extra = divmod(len(work), units)
        runs, start = [], 0
        for u in range(units):
            count = share + (u < extra)
            runs.append(done[start + count] - done[start])
            start += count
        return done[-1] / (units * max(runs))
    rp0, cp0 = -(-mc // mk.rows), -(-nc // mk.cols)
    if busy(rp0, cp0) >= balanced:
        return mc, nc
    options = []
    for rows in range(-(-row_panels // rp0), min(row_panels, 4 * -(-row_panels // rp0)) + 1):
        for cols in range(-(-col_panels // cp0), col_panels + 1):
            rp, cp = -(-row_panels // rows), -(-col_panels // cols)
            row_blocks, col_blocks = -(-row_panels // rp), -(-col_panels // cp)
            packed = col_blocks * big_m * big_k * per_call[0] + row_blocks * big_k * big_n * per_call[1]
            options.append((busy(rp, cp) < balanced, packed, row_blocks * col_blocks, -busy(rp, cp),
                            rp * mk.rows, cp * mk.cols))
    *_, mc, nc = min(options)
    return mc, nc


def l1_bytes(target: Target) -> int:
    """Capacity of the target's L1 per core, or a common size when the target does not say."""
    return _cache_bytes(target, "l1")


def _cache_bytes(target: Target, level: str) -> int:
    """Capacity of the target's cache `level`, or a common size when the target does not say."""
    sizes = {lv.name: lv.capacity for lv in target.levels}
    return sizes.get(level, DEFAULT_CACHE_BYTES[level])


def packed_operands(c: Compute, m: Contraction, mk: MicroKernel, mnkb: tuple[int, int, int, int],
                    constant_inputs: Collection[int]) -> tuple[PackedOperand, ...]:
    """The operands of contraction `m` as computed (micro-kernel `mk`, extents M, N, K
    and batch `mnkb`) packed at load: those read from a constant input, unless both
    sides read the same input (one pointer cannot hold two layouts)."""
    big_m, big_n, big_k, batch = mnkb
    loads = {"a": m.lhs, "b": m.rhs}
    batch_vars = {c.axes[d].name for d in m.batch}
    out = []
    for side in prepacked_sides(m, constant_inputs):
        e = loads[side]
        assert isinstance(e, Load)
        width, extent = (mk.rows, big_m) if side == "a" else (mk.cols, big_n)
        copies = batch if expr_vars(e) & batch_vars else 1
        out.append(PackedOperand(e.input, side, width, -(-extent // width), big_k, copies))
    return tuple(out)


def prepacked_sides(m: Contraction, constant_inputs: Collection[int]) -> tuple[str, ...]:
    """The GEMM sides ("a", "b") read from a constant input, so packed once at load;
    none where both read the same input (one pointer cannot hold two layouts)."""
    inputs = {side: e.input for side, e in (("a", m.lhs), ("b", m.rhs)) if isinstance(e, Load)}
    if len(inputs) < 2 or inputs["a"] == inputs["b"]:
        return ()
    return tuple(side for side, i in inputs.items() if i in constant_inputs)


def gemm_work(compute: Compute, tile: TileConfig) -> tuple[int, int] | None:
    """(multiply-adds run, bytes copied per call) of `compute` on the GEMM path as `tile`
    blocks it, or None where it takes none: every batch index, the channels exactly (rows
    a micro-kernel runs past them not counted), every position of the panels of an operand
    read in place (those past a row's end included), each panel over its live taps; a
    gathered operand's every tap, padding included. The copy is the padded input an
    operand read in place is made from (the roofline's reasons, compiler/cost/shortfall.py)."""
    g = tile.gemm
    if g is None:
        return None
    c, _ = merge_axes(compute, tile)
    d = g.direct
    if d is None:
        return g.batch * g.m * g.n * g.k, 0
    live = live_fraction(c, live_taps(c, g.read_in_place(c), d))
    channels = g.n if d.side == "a" else g.m
    return round(g.batch * channels * d.positions * g.k * live), 4 * d.copy_floats
