"""Contractions on the CPU: packed panels and an explicit-SIMD register micro-kernel.

This module renders the plan's `GemmBlocking` (`TileConfig.gemm`): whether a kernel
takes this path, its micro-kernel, blocks, orientation, the operand read in place and
those packed at load are decided in compiler/schedule/cpu_gemm.py when the plan is
built, where the cost model sees them.

A float32 Compute that `contraction.match_contraction` accepts (matmul, batched
matmul, 1x1 and implicit-GEMM convolution) is computed per batch index as
C[M x N] = A[M x K] B[K x N], A the rows operand, B the cols operand:
- one task per (batch, mc rows, nc cols) tile, OpenMP-parallel;
- K walked in kc-deep blocks; per block the task packs B (kc x nc) into panels
  of NR columns and A (mc x kc) into panels of MR rows, each contiguous in
  the order the micro-kernel reads it. Packing evaluates the operand
  expressions themselves, so a convolution's input patches (padding included,
  bounds checked there once) are packed like any matrix; edges past M or N
  are packed as zeros, so the micro-kernel always runs whole;
- the micro-kernel keeps an MR x NR block of C in named vector variables
  (GCC vector extensions, the target's SIMD width: `Target.lanes`) and
  runs the k-loop innermost: per k, NR/lanes vector loads of B, MR broadcasts
  of A, MR * NR/lanes FMAs;
- partial sums live in a per-task scratch tile; after the last K block the
  epilogue applies `post` and stores the valid part of the tile.

Scratch is one aligned heap block per thread of the team (malloc'd once per call). An
operand read in place from a padded copy of the input (c/direct.py) is copied once per
call by the team, which then waits at a barrier, or, where the tasks split only the
positions, into each thread's own scratch, a task's rows just before the task
(`_own_copy`).

Several contractions may share one translation unit (the GEMM members of a convolution
chain, compiler/codegen/c/chain.py): each is rendered with its own symbol `prefix` for
its vector types and micro-kernels, and without `team` it runs on the calling thread
(no work-sharing: the chain's tasks are shared instead), packing every operand per call
into scratch its caller hands in (`SCRATCH`, `scratch_floats` of them: a heap block per
call cost more than the GEMM).

A constant operand (a weight the plan packs at load: `GemmBlocking.packed`) is not packed per call: a
separate function, `<symbol>_pack<input>`, packs the whole of it once, when the
artifact is loaded, into panels that run over all of K (batch copies only when
the operand varies with a batch axis), and the kernel reads that instead
(compiler/schedule/prepack.py places it). Per call, packing a weight cost as
much as a third of a convolution, and most of a small-batch matmul whose
weight is stored transposed (Gemm transB=1: a strided gather per element).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager

from compiler.codegen.c.direct import (
    KOFF,
    LIVE_CLASS,
    ROWS_SHIFT,
    direct_taps,
    koff_table,
    live_list,
    live_tables,
    panel_base,
    start_task_copies,
    write_padded_copy,
    write_task_copy,
)
from compiler.codegen.c.team import mark_used, thread_scratch
from compiler.codegen.c.vector import (
    VECTOR_TYPE,
    VectorWriter,
    transpose_lines,
    vector_typedefs,
    vectorizes,
)
from compiler.codegen.c.vector_functions import VECTOR_FUNCTIONS
from compiler.codegen.cexpr import ExprWriter, clip_lines, flat_offset, literal, new_counter
from compiler.codegen.csource import CSource
from compiler.ir.affine import linear_form, load_stride, row_major_strides
from compiler.ir.te import ACC, Call, Compute, Expr, Load, TensorType, Var, children, walk
from compiler.schedule.gemm_blocking import DirectOperand, GemmBlocking, micro_tails
from compiler.schedule.live_taps import Ranges
from compiler.schedule.row_reach import RowReach, row_reach

SCRATCH = "tf_scratch"  # the scratch parameter of a GEMM run by the calling thread
LOCAL_BLOCK = "tf_block"  # a task's block of the micro-kernel, stored as computed
FLAT_K = "tf_k"  # the flat reduce index's TE variable name (unused when an axis has it)
MIN_SEGMENT = 8  # shorter innermost runs are walked element by element
MAX_KEPT_A_BYTES = 1 << 20  # a thread's A kept over its tasks (`keeps_a`): at most this much scratch
LINE_FLOATS = 16  # floats in a 64-byte cache line (x86, common Arm cores): the prefetch granule
IN_PLACE_AHEAD = 24  # steps of k: about 100 ns of a 14 x 2-vector micro-kernel's FMAs on an AVX-512 core


def render_gemm(c: Compute, g: GemmBlocking, params: Sequence[str], header: str, parallel: bool,
                src: CSource, symbol: str, prefix: str = "tf", team: bool = True) -> bool:
    """Append the micro-kernel, the kernel's team function (`header`, parameters `params`)
    and the load-time packing function of each operand packed at load (`symbol`_pack<input>)
    to `src`, as the plan's blocking `g` of `c` (axes merged) says; returns whether the
    tasks are split among the team. `prefix` names the unit's helpers (one per GEMM in
    the unit); without `team`, `header` runs every task on the calling thread, in the
    scratch its last parameter (`SCRATCH`) points to."""
    if not team and (g.direct is not None or g.packed):
        raise ValueError("a GEMM run by the calling thread packs its operands itself")
    taps = direct_taps(c, g)
    writer = _GemmWriter(c, g, params, src, prefix, taps)
    _micro_kernels(g, src, prefix, taps, writer.local)
    split = writer.write(header, parallel, team)
    writer.write_packers(symbol)
    return split


def scratch_floats(g: GemmBlocking) -> int:
    """Floats of one thread's scratch: the C tile, then the A and B blocks packed per call
    (each region starts on a cache line: the micro-kernel's vector loads assume alignment)."""
    packed = {p.side for p in g.packed} | ({g.direct.side} if g.direct is not None else set())
    b_floats = 0 if "b" in packed else g.kc * g.nc
    return g.mc * tile_stride(g) + a_scratch_floats(g) + b_floats


def packs_a_per_call(g: GemmBlocking) -> bool:
    """Whether the kernel packs A itself, each call: not packed at load, not read in place."""
    return "a" not in {p.side for p in g.packed} and (g.direct is None or g.direct.side != "a")


def a_block_rows(g: GemmBlocking) -> int:
    """Rows of a packed A block: mc in whole MR panels."""
    return -(-g.mc // g.mk.rows) * g.mk.rows


def a_scratch_floats(g: GemmBlocking) -> int:
    """Floats of a thread's A block packed per call: one K block's, or every K block's
    where the thread keeps them for its next task (`keeps_a`); none where A comes packed
    at load or is read in place."""
    if not packs_a_per_call(g):
        return 0
    return -(-(g.k if keeps_a(g) else g.kc) * a_block_rows(g) // 16) * 16


def keeps_a(g: GemmBlocking) -> bool:
    """Whether each thread keeps its packed A block, every K block of it, while its next
    task computes the same rows (tasks walk the column blocks of a row block in turn), and
    packs A again only for a task on other rows. A is then packed once per row block, not
    once per column block: a matmul of 128 x 768 activations by 768 x 3072 weights (packed
    at load) packed its A twelve times a call. Not where the rows' every K block would
    outgrow MAX_KEPT_A_BYTES of scratch."""
    return packs_a_per_call(g) and g.blocks[1] > 1 and 4 * g.k * g.mc <= MAX_KEPT_A_BYTES


def stores_from_registers(c: Compute, g: GemmBlocking) -> int | None:
    """The output axis whose positions fill the micro-kernel's vectors, where each block of
    the micro-kernel is stored to `out` as it is computed (post applied on the vectors)
    instead of through the C tile in scratch and an epilogue pass over it; None where it
    is not. That is where the columns are the output's innermost axis, whole vectors of
    it (a packed GEMM: a 1x1 convolution, a matmul), the post vectorizing along it. Where K
    is one block the micro-kernel writes a block of its own (`local`); where it takes
    several, the sums are carried in the C tile and each block is stored from there right
    after the last K block's call, while in L1: a 128 x 768 x 3072 matmul (two K blocks)
    spent 3% of its time in the epilogue's copy of the whole tile. A 1x1 expand convolution with
    K = 16 (96 channels over 112 x 112, MobileNetV2) wrote and read back its whole output
    through scratch for 16 multiply-adds an output: 588 -> 456 us at one thread, 357 ->
    310 at two (Zen 4, C harness). Not for positions read in place (c/direct.py): a 1x1
    convolution reading its input in place as B, stored this way, ran 1.03-1.28x its time
    through the C tile and an epilogue over the task's tile (16 -> 96 channels over 112 x
    112, 24 -> 144 over 56 x 56; Zen 4, same plans timed in rounds); those now store each
    block from the C tile as soon as it is done (`_block_epilogue`)."""
    if g.direct is not None or g.swapped or c.dtype != "float32":
        return None
    last = len(c.axes) - 1
    if [d for d in g.contraction(c).cols if c.axes[d].extent > 1] != [last] or g.n % g.mk.lanes:
        return None
    if c.post is not None and not vectorizes(c.post, c.axes[last].name, c.inputs, "float32", {ACC}):
        return None
    return last


def tile_stride(g: GemmBlocking) -> int:
    """Floats from one row of the C tile in scratch to the next: nc rounded up to whole
    cache lines (LINE_FLOATS), and an odd number of them. A power-of-two row (nc = 4096
    positions: 16 KiB) put every row of a micro-kernel's block of C in one L1 set, and
    where K takes several blocks each call loads and stores that block: the 3x3 stride-2
    32 -> 64 convolution on 128 x 128 (two K blocks), one thread, AVX-512, 1.33 -> 1.20-1.29
    ms; the ASPP segmenter 0.826x -> 0.840x onnxruntime (medians of 5 alternating runs)."""
    lines = -(-g.nc // LINE_FLOATS)
    return (lines + 1 - lines % 2) * LINE_FLOATS


def micro_name(rows: int, vectors: int, g: GemmBlocking, prefix: str = "tf", live: bool = False,
               local: bool = False) -> str:
    """The micro-kernel computing `rows` x `vectors` of the MR x NR block (tails: fewer),
    over every reduce index of a K block or (`live`) over a list of them, into the C tile
    or (`local`) a block of the caller's."""
    suffix = "" if rows == g.mk.rows else f"_r{rows}"
    return (f"{prefix}_micro{suffix}{'' if vectors == g.mk.vectors else f'_v{vectors}'}{'_live' * live}"
            f"{'_local' * local}")


def _micro_kernels(g: GemmBlocking, src: CSource, prefix: str, taps: list[Ranges] | None,
                   local: bool = False) -> None:
    """The full micro-kernel and those of the tails (`micro_tails`), each also over the
    live taps' list where a panel of patches read in place skips some (`taps`); `local`:
    writing a block of its own instead of the C tile (`stores_from_registers`)."""
    src.line(f"typedef float {prefix}_vf __attribute__((vector_size({4 * g.mk.lanes})));")
    if g.direct is not None:
        if g.direct.side == "b":  # B vectors at any float's address
            src.line(f"typedef float {prefix}_vu __attribute__((vector_size({4 * g.mk.lanes}), aligned(4), may_alias));")
        koff_table(g.direct, src)
        if taps is not None:
            live_tables(g.direct, taps, g.k, g.kc, src)
    row_tail, vector_tail = micro_tails(g.mk, g.m, g.n)
    for rows in dict.fromkeys((g.mk.rows, row_tail or g.mk.rows)):
        for vectors in dict.fromkeys((g.mk.vectors, vector_tail or g.mk.vectors)):
            for live in (False, True) if taps is not None else (False,):
                _micro_kernel(g, rows, vectors, src, prefix, live, local)


def _micro_kernel(g: GemmBlocking, rows: int, vectors: int, src: CSource, prefix: str, live: bool = False,
                  local: bool = False) -> None:
    """`rows` x `vectors` accumulators over panels packed MR x NR (a tail reads a prefix);
    `live`: over the kc (offset in `pad`, k) pairs of the list `koff` (c/direct.py);
    `local`: stored to a block MR x NR of the caller's, not to the C tile.

    A function of its own (noinline; GCC still clones it for constant arguments), so that
    its registers are its own: inlined into the kernel, GCC 12 kept an epilogue's constants
    (tanh's polynomial) in vector registers across it and spilled accumulators to the stack
    (T5's gated GELU, 128 x 1024 x 256 on AVX-512: 564 us against 350 for the plain product)."""
    mk, ldc = g.mk, (g.mk.cols if local else tile_stride(g))
    accs = [[f"c{i}_{j}" for j in range(vectors)] for i in range(rows)]
    direct = g.direct.side if g.direct is not None else ""
    koff = ", const int32_t* restrict koff" if direct else ""
    vf, vu = f"{prefix}_vf", f"{prefix}_vu"
    prefetch = ", const float* pf" if _prefetches(g) else ""
    header = (f"static __attribute__((noinline)) void {micro_name(rows, vectors, g, prefix, live, local)}(int64_t kc, "
              f"const float* restrict a, const float* restrict b{koff}, float* restrict c, int first{prefetch})")
    with src.block(header):
        src.line(f"{vf} {', '.join(x for row in accs for x in row)};")
        if local:  # K is one block: every call starts from zero
            src.line("(void)first;")
            src.extend([f"{x} = ({vf}){{0}};" for row in accs for x in row])
        else:
            with src.block("if (first)"):
                src.extend([f"{x} = ({vf}){{0}};" for row in accs for x in row])
            with src.block("else"):
                src.extend([f"{accs[i][j]} = *(const {vf}*)(c + {i * ldc + j * mk.lanes});"
                            for i in range(rows) for j in range(vectors)])
        src.line("#pragma GCC unroll 4")
        with src.block(f"for (int64_t {'q' if live else 'k'} = 0; {'q' if live else 'k'} < kc; ++{'q' if live else 'k'})"):
            off = "koff[k]"
            if live:
                src.line("const int64_t k = koff[2 * q + 1], o = koff[2 * q];")
                off = "o"
            for j in range(vectors):
                if direct == "b":
                    src.line(f"const {vf} b{j} = *(const {vu}*)(b + {off} + {j * mk.lanes});")
                else:
                    src.line(f"const {vf} b{j} = *(const {vf}*)(b + k * {mk.cols} + {j * mk.lanes});")
            if prefetch:  # a line of the next B panel per k (see `_prefetches`)
                src.line(f"__builtin_prefetch(pf + k * {LINE_FLOATS}, 0, 2);")
            step = g.direct.step if g.direct is not None and direct == "a" else 1
            if direct and g.prefetch_in_place:
                _prefetch_in_place(g, direct, rows, vectors, step, live, src)
            if direct == "a":  # the rows' patches in place: position i at step * i
                src.line(f"const float* const ak = a + {off};")
            else:
                src.line(f"const float* const ak = a + k * {mk.rows};")
            for i in range(rows):
                src.extend([f"{accs[i][j]} += b{j} * ak[{i * step}];" for j in range(vectors)])
        src.extend([f"*({vf}*)(c + {i * ldc + j * mk.lanes}) = {accs[i][j]};"
                    for i in range(rows) for j in range(vectors)])


def _prefetch_in_place(g: GemmBlocking, side: str, rows: int, vectors: int, step: int, live: bool,
                       src: CSource) -> None:
    """Prefetch the lines of the operand read in place (`side`; A's positions `step` floats
    apart) that the micro-kernel reads IN_PLACE_AHEAD steps of k later. Its steps are rows
    of an input, far apart, each read for a few floats: the hardware's stride prefetcher
    runs too little ahead of them, and inside a model the input was just written by other
    cores, whose lines take a round trip to fetch (MobileNetV2's 384 -> 64 projection on 14 x 14, channels in the lanes,
    two threads, Intel Xeon: 67 -> 44 us inside its block, 41 us timed alone). Past the
    block's last step the stream goes on into the next panel's first steps (the panel a
    panel's width on along the positions, where the next call reads, or nearly: a line's
    end is a prefetch of lines nobody reads), so a shallow block (a 1x1 convolution of
    32 channels: 32 steps) is fetched ahead too, and a deep one's next call starts on
    lines already coming (three MBConv blocks on 14 x 14, two threads, Intel Xeon: 0.392
    -> 0.372 ms; MobileNetV2 3.86 -> 3.69 and 3.74 -> 3.61 ms in two alternating runs); a
    list of live taps stops at its last."""
    span = (rows - 1) * step + 1 if side == "a" else vectors * g.mk.lanes  # floats read per step
    if live:
        ahead = f"q + {IN_PLACE_AHEAD} < kc ? q + {IN_PLACE_AHEAD} : kc - 1"
        src.line(f"const float* const ahead = {side} + koff[2 * ({ahead})];")
    else:
        width = g.mk.rows * step if side == "a" else g.mk.cols  # floats from a panel's first position to the next's
        src.line(f"const int64_t ka = k + {IN_PLACE_AHEAD};")
        src.line(f"const float* const ahead = {side} + (ka < kc ? koff[ka] : "
                 f"koff[ka - kc < kc ? ka - kc : kc - 1] + {width}L);")
    for o in dict.fromkeys([*range(0, span, LINE_FLOATS), span - 1]):
        src.line(f"__builtin_prefetch(ahead + {o}, 0, 3);")


def _prefetches(g: GemmBlocking) -> bool:
    """Whether the micro-kernel prefetches the next B panel (argument `pf`) into L2 while it
    computes on this one: B comes in panels (not read in place), and the calls over panel
    jp prefetch panel jp + 1 a line per k (`_next_panel`). A weight packed at load streams from DRAM
    once per call, in panels the hardware prefetcher only follows once the first call on
    each has stalled on it (bert ffn1 128x768x3072, one thread: 84% -> 93% of FMA peak
    without packing and epilogue); a panel packed per call is already in L2, and its
    prefetches cost one load slot per line of B."""
    return g.direct is None or g.direct.side == "a"


def _carry(axes: Sequence[int], extents: Sequence[int], prefix: str) -> str:
    """C statement stepping the row-major index `axes` (extents `extents`) by one."""
    step = f"++{prefix}{axes[0]};"
    for pos in range(1, len(axes)):
        name = f"{prefix}{axes[pos]}"
        step = f"if (++{name} == {extents[pos]}L) {{ {name} = 0; {step} }}"
    return step


class _GemmWriter:
    """Writes the tiled, packed GEMM loop nest of one contraction."""

    def __init__(self, c: Compute, g: GemmBlocking, params: Sequence[str], src: CSource, prefix: str,
                 taps: list[Ranges] | None = None) -> None:
        self.c, self.m, self.g, self.params, self.src = c, g.contraction(c), g, params, src
        self.prefix, self.taps = prefix, taps
        self.stored_axis = stores_from_registers(c, g)  # blocks stored as computed along it
        self.local = self.stored_axis is not None and g.k <= g.kc  # ... from a block of the micro-kernel's own
        self.packed = {p.side: p for p in g.packed}
        self.ldc = tile_stride(g)  # floats between rows of the C tile in scratch
        self.counter = new_counter()
        self.names = {a.name: f"i{d}" for d, a in enumerate(c.axes)}
        self.names.update({a.name: f"r{k}" for k, a in enumerate(c.reduce_axes)})
        self.ranges = {a.name: (0, a.extent - 1) for a in c.all_axes()}
        self.rows_shifted = False  # each task's rows copied to the start of its thread's `pad` (`write`)

    def _extents(self, axes: Sequence[int], prefix: str) -> list[int]:
        return ([self.c.axes[d].extent for d in axes] if prefix == "i"
                else [self.c.reduce_axes[d].extent for d in axes])

    def _unit_axes(self, axes: Sequence[int], prefix: str) -> list[int]:
        """The axes of extent above 1 (declaring those of extent 1 as constant 0)."""
        extents = self._extents(axes, prefix)
        for d, e in zip(axes, extents, strict=True):
            if e == 1:
                self.src.line(f"const int64_t {prefix}{d} = 0;")
        return [d for d, e in zip(axes, extents, strict=True) if e > 1]

    def _decode(self, flat: str, axes: Sequence[int], prefix: str = "i", qualifier: str = "const ") -> None:
        """Declare the axes `axes` (row-major, `prefix`{d}) of flat index `flat`."""
        axes = self._unit_axes(axes, prefix)
        extents = self._extents(axes, prefix)
        for pos, d in enumerate(axes):
            inner = math.prod(extents[pos + 1:])
            value = flat if inner == 1 else f"{flat} / {inner}L"
            if pos:
                value = f"({value}) % {extents[pos]}L"
            self.src.line(f"{qualifier}int64_t {prefix}{d} = {value};")

    @contextmanager
    def _walk(self, var: str, count: int | str, origin: str, axes: Sequence[int],
              prefix: str = "i",
              segment: Callable[[str, str, str], tuple[str, str] | None] | None = None,
              chunk: tuple[int, Callable[[str], None]] | None = None,
              vector: tuple[int, Callable[[str], None]] | None = None) -> Iterator[None]:
        """A loop of `count` steps over flat indices origin + var with the axes `axes`
        declared in the body. With several axes (beyond those of extent 1) the loop runs
        in segments along the innermost one: the outer axes are decoded once and carried
        from segment to segment (no division per element), and within a segment the
        innermost axis is the loop index plus a constant, so gcc can vectorize it.
        `segment(first, start, run)`, when given, writes statements before each segment's
        loop (given the C expression of the innermost axis at the segment's start, and
        the names of the segment's first flat index and length); it may return offsets
        (lo, hi) that narrow the loop to [start + lo, start + hi).
        `chunk` = (width, declare): the element loops are split where `var` reaches a
        multiple of width, and `declare(first)` writes statements before each piece
        (given the C expression of its first `var`). `vector` = (lanes, step): within
        a segment, a loop of `step(v)` statements (v the first of `lanes` consecutive
        values of `var`, the axes declared for it) takes whole vectors of elements
        first, then one vector ending at the run's end where the run holds one (so
        `step` must be idempotent: a copy), the body the rest."""
        src = self.src

        @contextmanager
        def elements(first: str, end: str, index: Callable[[str], None],
                     vector: tuple[int, Callable[[str], None]] | None) -> Iterator[None]:
            with ExitStack() as pieces:
                if chunk is not None:
                    width, declare = chunk
                    piece, stop = f"{var}c", f"{var}e"
                    pieces.enter_context(src.block(f"for (int64_t {piece} = {first}, {stop}; {piece} < {end}; {piece} = {stop})"))
                    src.line(f"{stop} = ({piece} / {width}L + 1) * {width}L < {end} ? ({piece} / {width}L + 1) * {width}L : {end};")
                    declare(piece)
                    first, end = piece, stop
                if vector is not None:
                    first = self._whole_vectors(var, first, end, vector[0], lambda v: (index(v), vector[1](v)))
                with src.block(f"for (int64_t {var} = {first}; {var} < {end}; ++{var})"):
                    index(var)
                    yield

        if sum(e > 1 for e in self._extents(axes, prefix)) <= 1:
            # one axis: each element decoded on its own
            with elements("0", str(count), lambda v: self._decode(f"({origin} + {v})", axes, prefix), vector):
                yield
            return
        with src.block(""):
            axes = self._unit_axes(axes, prefix)
            extents = self._extents(axes, prefix)
            if extents[-1] < MIN_SEGMENT:
                yield from self._carried(var, count, origin, axes, prefix, chunk)
                return
            outer, inner = axes[:-1], axes[-1]
            self._decode(f"({origin}) / {extents[-1]}L", outer, prefix, "")
            start, run = f"{var}s", f"{var}n"
            src.line(f"int64_t {start}{inner} = ({origin}) % {extents[-1]}L;")
            with src.block(f"for (int64_t {start} = 0, {run}; {start} < {count}; {start} += {run})"):
                src.line(f"{run} = {count} - {start} < {extents[-1]}L - {start}{inner} ? "
                         f"{count} - {start} : {extents[-1]}L - {start}{inner};")
                lo, hi = "0", run
                clipped = segment(f"{start}{inner}", start, run) if segment is not None else None
                if clipped is not None:
                    lo, hi = clipped
                def index(v: str) -> None:
                    src.line(f"const int64_t {prefix}{inner} = {start}{inner} + ({v} - {start});")
                with elements(f"{start} + {lo}", f"{start} + {hi}", index, vector):
                    yield
                src.line(f"{start}{inner} = 0;")
                src.line(_carry(outer, extents, prefix))

    def _whole_vectors(self, var: str, first: str, end: str, lanes: int, step: Callable[[str], object]) -> str:
        """A loop of `step(v)` over whole vectors of `lanes` values of `var` from `first`,
        then, where the run [first, end) holds a vector, one more ending at `end` (so `step`
        must be idempotent: its stores the same values again); returns the C expression
        where the element loop for the rest starts."""
        src = self.src
        src.line(f"int64_t {var}v = {first};")
        with src.block(f"for (; {var}v + {lanes}L <= {end}; {var}v += {lanes}L)"):
            step(f"{var}v")
        # the rest of a run of at least one vector: one more, overlapping the last
        with src.block(f"if ({var}v < {end} && {end} - ({first}) >= {lanes}L)"):
            src.line(f"{var}v = {end} - {lanes}L;")
            step(f"{var}v")
            src.line(f"{var}v = {end};")
        return f"{var}v"

    def _carried(self, var: str, count: int | str, origin: str, axes: Sequence[int],
                 prefix: str, chunk: tuple[int, Callable[[str], None]] | None) -> Iterator[None]:
        """The walk for a short innermost axis: all axes decoded once, carried per step
        (a `chunk` declaration, then, before every step)."""
        src = self.src
        self._decode(f"({origin})", axes, prefix, "")
        with src.block(f"for (int64_t {var} = 0; {var} < {count}; ++{var})"):
            if chunk is not None:
                chunk[1](var)
            yield
            src.line(_carry(axes, self._extents(axes, prefix), prefix))

    def _emit(self, e: Expr, names: dict[str, str] | None = None) -> str:
        w = ExprWriter(self.c.inputs, names or self.names, self.counter, self.ranges)
        value = w.emit(e)
        self.src.extend(w.lines)
        return value

    def write(self, header: str, parallel: bool, team: bool) -> bool:
        """The team function (c/team.py): each thread packs into scratch of its own;
        returns whether the tasks are split among the team. Without `team`, a plain
        function of the calling thread."""
        g, mk, src = self.g, self.g.mk, self.src
        (tm, tn), tasks = g.blocks, g.tasks
        in_place = g.direct.side if g.direct is not None else ""
        a_floats, keep_a = a_scratch_floats(g), keeps_a(g)
        a_block = "a_all" if keep_a else "ap"  # every K block's A, or the current one's
        split = team and parallel and tasks > 1
        own = self._own_copy(team, tm, tn)
        self.rows_shifted = own is not None
        with src.block(header):
            mark_used(src, self.params)
            if g.direct is not None and own is None:
                self._padded_input(g.direct)
            with self._scratch(team, split, own is not None):
                src.line(f"float* const {a_block} = ct + {g.mc * self.ldc};")
                src.line(f"float* const bp = {a_block} + {a_floats};")
                if self.packed:
                    src.line(f"(void){a_block}; (void)bp;  /* one of them is unused: its operand comes packed */")
                if keep_a:
                    src.line("int64_t a_at = -1;  /* the row block (and batch) whose A the thread holds */")
                if split:
                    src.line("#pragma omp for schedule(static) nowait")
                with src.block(f"for (int64_t t = 0; t < {tasks}L; ++t)"):
                    src.line(f"const int64_t m0 = (t / {tn}L) % {tm}L * {g.mc}L;")
                    src.line(f"const int64_t n0 = t % {tn}L * {g.nc}L;")
                    src.line(f"const int64_t mv = {g.m}L - m0 < {g.mc}L ? {g.m}L - m0 : {g.mc}L;")
                    src.line(f"const int64_t nv = {g.n}L - n0 < {g.nc}L ? {g.n}L - n0 : {g.nc}L;")
                    src.line(f"const int64_t mp = (mv + {mk.rows - 1}L) / {mk.rows}L;")
                    src.line(f"const int64_t np = (nv + {mk.cols - 1}L) / {mk.cols}L;")
                    if own is not None and g.direct is not None:
                        first, count = ("n0", "nv") if g.direct.side == "b" else ("m0", "mv")
                        write_task_copy(g.direct, own, self.c.inputs[g.direct.input].shape, first, count, src)
                    self._decode(f"(t / {tm * tn}L)", self.m.batch)
                    if keep_a:
                        src.line(f"const int a_fresh = t / {tn}L != a_at;")
                        src.line(f"a_at = t / {tn}L;")
                    if self.local:
                        src.line(f"float {LOCAL_BLOCK}[{mk.rows * mk.cols}] __attribute__((aligned(64)));")
                    with src.block(f"for (int64_t k0 = 0; k0 < {g.k}L; k0 += {g.kc}L)"):
                        src.line(f"const int64_t kc = {g.k}L - k0 < {g.kc}L ? {g.k}L - k0 : {g.kc}L;")
                        if "b" not in self.packed and in_place != "b":
                            self._pack_b()
                        if keep_a:
                            src.line(f"float* const ap = a_all + k0 * {a_block_rows(g)}L;")
                            with src.block("if (a_fresh)"):
                                self._pack_a()
                        elif packs_a_per_call(g):
                            self._pack_a()
                        a = self._panel("a", "ap + ip * kc", "m0", "ip", tm * tn)
                        b = self._panel("b", "bp + jp * kc", "n0", "jp", tm * tn)
                        pf = self._next_panel(tm * tn) if _prefetches(g) else ""
                        with (src.block("for (int64_t jp = 0; jp < np; ++jp)"),
                              src.block("for (int64_t ip = 0; ip < mp; ++ip)")):
                            self._micro_calls(a, b, pf)
                            if g.direct is not None and g.direct.side == "b" and not g.tile_stores:
                                self._block_epilogue(g.direct)  # each block as it is done
                    if g.direct is not None:
                        if g.direct.side == "a" or g.tile_stores:
                            self._direct_epilogue(g.direct)
                    elif self.stored_axis is None:
                        self._epilogue()
            if g.direct is not None and g.direct.copied and own is None:  # every thread is done reading it
                src.line("#pragma omp barrier")
                src.line("#pragma omp single nowait")
                src.line("free(pad);")
        return split

    @contextmanager
    def _scratch(self, team: bool, split: bool, own_copy: bool = False) -> Iterator[None]:
        """A block with `float* ct`: scratch of each team thread's own (c/team.py), or,
        for a GEMM the calling thread runs, the caller's (`SCRATCH`). `own_copy`: the
        thread's scratch also holds its own `pad` (`_own_copy`), its slack zeroed."""
        if team:
            floats = -(-scratch_floats(self.g) // 16) * 16  # `pad` starts on a cache line
            d = self.g.direct
            extra = -(-d.floats // 16) * 16 if own_copy and d is not None else 0
            with thread_scratch(self.src, split, "ct", floats + extra):
                if own_copy and d is not None:
                    self.src.line(f"float* const pad = ct + {floats};")
                    start_task_copies(d, self.src)
                yield
            return
        with self.src.block(""):
            self.src.line(f"float* const ct = {SCRATCH};")
            yield

    def _own_copy(self, team: bool, tm: int, tn: int) -> RowReach | None:
        """Where each task copies the rows of the input read in place that it reads into
        its thread's scratch (c/direct.py `write_task_copy`), instead of the team copying
        the whole input once and waiting for it: a team function whose tasks split only
        the positions (one tile of the other side, no batch), so no two tasks copy the same
        rows but for their windows' overlap. The rows then sit in the L2 of the core that
        reads them. The segmenter's 32 -> 64 stride-2 convolution on 128 x 128 spent 60 of
        800 us (two threads, Zen 4) in the shared copy and its barrier."""
        d = self.g.direct
        if not team or d is None or self.g.batch != 1 or (tm if d.side == "b" else tn) != 1:
            return None
        return row_reach(self.c, self.g.read_in_place(self.c), d)

    def _padded_input(self, d: DirectOperand) -> None:
        """`float* pad`, shared by the team: the input read in place, copied once, padded
        (c/direct.py)."""
        src = self.src
        if not d.copied:
            src.line(f"const float* const pad = in{d.input};")
            return
        src.line("float* pad;")
        src.line("#pragma omp single copyprivate(pad)")
        with src.block(""):
            src.line(f"pad = (float*)aligned_alloc(64, {4 * -(-d.floats // 16) * 16}UL);")
            src.line("if (!pad) abort();")
        write_padded_copy(d, self.c.inputs[d.input].shape, src)

    def _direct_epilogue(self, d: DirectOperand) -> None:
        """post(acc) for the valid part of the tile, one side of which is the panels of
        output positions read in place (c/direct.py), stored to `out` after the task's last
        K block: along the positions (B, where `tile_stores`; else each block is stored as
        it is done, `_block_epilogue`), or for each channel along a panel's positions (A)."""
        src, c = self.src, self.c
        offset = flat_offset(c.shape, [f"i{a}" for a in range(len(c.axes))])
        walked = self.m.cols if d.side == "b" else self.m.rows
        src.extend([f"const int64_t i{a} = 0;" for a in walked if c.axes[a].extent == 1])
        if d.side == "b":
            with self._row_runs(d), src.block("for (int64_t i = 0; i < mv; ++i)"):
                self._decode("(m0 + i)", self.m.rows)
                self._store_run(d, lambda e: f"i * {self.ldc}L + (q - n0) + {e}")
            return

        def store(at: str) -> None:  # out at the current indices, from ct[at]
            src.line(f"out[{offset}] = {self._post_of(f'ct[{at}]')};")
        if self._transposed_epilogue(d, offset, store):
            return

        def channels() -> None:  # each channel's positions in turn
            with self._walk("j", "nv", "n0", self.m.cols):
                self._store_run(d, lambda e: f"(ip * {d.panel}L + l + {e}) * {self.ldc}L + j", vector=False)
        with src.block(f"for (int64_t ip = 0; ip < mv / {d.panel}L; ++ip)"):
            self._position_runs(d, f"m0 / {d.panel}L + ip", channels)

    def _block_epilogue(self, d: DirectOperand) -> None:
        """post(acc) of the block the micro-kernel just finished (panel ip, jp; positions
        read in place as B), stored to `out` a row at a time while it is in L1, in the last
        K block. Stored after the task's last K block instead, the whole C tile came back
        from L2 and the stores of a small-K convolution ran after its FMAs, not among them:
        the 3x3 stride-2 stem 3 -> 32 on 256 x 256 (K = 27, 2 MB out), one thread, Intel
        Xeon, 272 -> 231 us (hand-edited, outputs identical); a 32 -> 64 one with K = 288
        unchanged. The tile stored after the last K block (`tile_stores`) is timed beside it
        (compiler/schedule/cpu_gemm.py `gemm_variants`)."""
        src, c, g = self.src, self.c, self.g
        rows = g.mk.rows
        guard = f"if (k0 + kc >= {g.k}L)" if g.k > g.kc else ""
        with src.block(guard):
            src.line(f"const int64_t rr = mv - ip * {rows}L < {rows}L ? mv - ip * {rows}L : {rows}L;")
            src.extend([f"const int64_t i{a} = 0;" for a in self.m.cols if c.axes[a].extent == 1])

            def body() -> None:
                with src.block("for (int64_t r = 0; r < rr; ++r)"):
                    self._decode(f"(m0 + ip * {rows}L + r)", self.m.rows)
                    self._store_run(d, lambda e: f"(ip * {rows}L + r) * {self.ldc}L + jp * {g.mk.cols}L + l + {e}")
            self._position_runs(d, f"n0 / {g.mk.cols}L + jp", body)

    def _post_of(self, value: str) -> str:
        """C expression: post applied to accumulator expression `value` (itself without one)."""
        return value if self.c.post is None else self._emit(self.c.post, {**self.names, ACC: value})

    def _store_run(self, d: DirectOperand, at: Callable[[str], str], vector: bool = True) -> None:
        """post(ct[at(e)]) stored to `out` for the run's positions e < `valid`, contiguous in
        `out` from column `w` of the output's innermost axis: a loop gcc vectorizes, or whole
        vectors where `post` calls a vector function (`_vector_epilogue`; with `vector`)."""
        src, c = self.src, self.c
        offset = flat_offset(c.shape, [f"i{a}" for a in range(len(c.axes))])
        lanes_step = self._vector_epilogue(offset, at, d.inner) if vector else None
        first = "0"
        with src.block(""):
            if lanes_step is not None:
                def step(v: str) -> None:
                    src.line(f"const int64_t i{d.inner} = w + {v};")
                    lanes_step[1](v)
                first = self._whole_vectors("e", "0", "valid", lanes_step[0], step)
            with src.block(f"for (int64_t e = {first}; e < valid; ++e)"):
                src.line(f"const int64_t i{d.inner} = w + e;")
                acc = f"ct[{at('e')}]"
                src.line(f"out[{offset}] = {self._post_of(acc)};")

    def _transposed_epilogue(self, d: DirectOperand, offset: str, store: Callable[[str], None]) -> bool:
        """The epilogue of positions read in place as A, where their output rows hold whole
        vectors: each row's run of positions in the task, `lanes` channels at a time, its
        tile (positions x channels) transposed in registers (`transpose_lines`) so that
        post(acc) is computed and stored along the row in whole vectors (the last one
        ending at the run's end, overlapping); the channels past the last whole vector,
        and runs shorter than a vector, one element at a time (`store`). Stored across
        the channels instead, each output cost a scalar load and store: 30% of the
        stem's 7x7 convolution. Rows narrower than a vector whose positions follow each
        other in `out` and in everything `post` reads (`_flat_rows`) are one run: the
        vectors cross rows (a 1x1 stride-2 convolution to 14 x 14, 1024 channels: its
        store across the channels took 10% of it). Returns False, writing nothing, where
        it does not apply (rows folded into planes or narrower than a vector and not
        flat, several channel axes, a `post` that is not vectors along the row)."""
        c, src, g = self.c, self.src, self.g
        lanes, ldc = g.mk.lanes, self.ldc
        channels = [a for a in self.m.cols if c.axes[a].extent > 1]
        var = c.axes[d.inner].name
        if (d.side != "a" or d.fold is not None or len(channels) != 1 or c.dtype != "float32"
                or (c.post is not None and not vectorizes(c.post, var, c.inputs, "float32", {ACC}))):
            return False
        flat = d.width < lanes
        if flat and not self._flat_rows(d):
            return False
        src.extend(vector_typedefs("float32", lanes))
        src.extend([f"const int64_t i{a} = 0;" for a in self.m.cols if c.axes[a].extent == 1])
        chan, rows = channels[0], [f"v{e}" for e in range(lanes)]
        # a line: the positions a run may span (one output row; every row of the task where flat)
        line = d.positions if flat else d.line_panels * d.panel
        width = line if flat else d.width

        def position(x: str) -> None:  # the walked axes of position x of the line
            if not flat:
                src.line(f"const int64_t i{d.inner} = {x};")
                return
            src.line(f"const int64_t i{d.inner} = {x} % {d.width}L;")
            self._outer_axes(d, f"({x} / {d.width}L)", 1)
        with src.block("for (int64_t q = m0, qe; q < m0 + mv; q = qe)"):
            src.line(f"const int64_t line = q / {line}L, x0 = q % {line}L;")
            src.line(f"qe = (line + 1) * {line}L < m0 + mv ? (line + 1) * {line}L : m0 + mv;")
            src.line(f"const int64_t x1 = x0 + (qe - q) < {width}L ? x0 + (qe - q) : {width}L;")
            src.line(f"const float* const cq = ct + (q - m0) * {ldc}L;  /* position x0's row of the tile */")
            if not flat:
                self._outer_axes(d, "line", 1)
            src.line("int64_t jv = 0;")
            with (src.block(f"if (x1 - x0 >= {lanes}L)"),
                  src.block(f"for (; jv + {lanes}L <= nv; jv += {lanes}L)"),
                  src.block(f"for (int64_t xs = x0; xs < x1; xs += {lanes}L)")):
                src.line(f"const int64_t x = xs + {lanes}L > x1 ? x1 - {lanes}L : xs;")
                position("x")
                src.extend([f"{VECTOR_TYPE} {r} = *(const {VECTOR_TYPE}*)(cq + (x - x0 + {e}) * {ldc}L + jv);"
                            for e, r in enumerate(rows)])
                src.extend(transpose_lines(rows, lanes))
                src.line(f"const {VECTOR_TYPE} tr[{lanes}] = {{{', '.join(rows)}}};")
                with src.block(f"for (int64_t ch = 0; ch < {lanes}L; ++ch)"):
                    src.line(f"const int64_t i{chan} = n0 + jv + ch;")
                    self._store_vector("tr[ch]", offset, var)
            with src.block("for (int64_t j = jv; j < nv; ++j)"):
                src.line(f"const int64_t i{chan} = n0 + j;")
                with src.block("for (int64_t e = x0; e < x1; ++e)"):
                    position("e")
                    store(f"(q - m0 + e - x0) * {ldc}L + j")
        return True

    def _flat_rows(self, d: DirectOperand) -> bool:
        """Whether the task's positions of `d` (read in place as A) follow each other with no
        gap in the C tile (lines of whole panels), in `out` and in every load of `post`, so
        that a vector of them may cross rows: each walked axis steps over the ones inside
        it, and `post` names the positions only in such loads (or loads that do not move
        with them: a bias per channel)."""
        c = self.c
        if d.line_panels * d.panel != d.width or d.batch:
            return False
        walked = [(d.inner, d.width), *((axis, extent) for axis, extent, _ in reversed(d.outer))]
        names = {c.axes[axis].name for axis, _ in walked}

        def steps_flat(strides: Sequence[int]) -> bool:  # per walked axis, innermost first
            span = 1
            for stride, (_, extent) in zip(strides, walked, strict=True):
                if stride != span:
                    return False
                span *= extent
            return True
        out_strides = row_major_strides(c.shape)
        if not steps_flat([out_strides[axis] for axis, _ in walked]):
            return False

        def flat(e: Expr) -> bool:
            if isinstance(e, Var):
                return e.name not in names
            if isinstance(e, Load):
                strides = [load_stride(e, c.inputs[e.input].shape, c.axes[axis].name) for axis, _ in walked]
                return e.pad is None and (all(s == 0 for s in strides) or steps_flat(strides))
            return all(flat(x) for x in children(e))
        return c.post is None or flat(c.post)

    def _store_vector(self, acc: str, offset: str, var: str) -> None:
        """Store post(`acc`), a vector of accumulators along output axis variable `var`
        (its first position declared), to `out` at `offset`."""
        value = acc
        if self.c.post is not None:
            w = VectorWriter(self.c.inputs, {**self.names, ACC: acc}, self.counter, var, self.g.mk.lanes, {ACC})
            value = w.emit_vector(self.c.post)
            self.src.extend(w.lines)
            self.src.define(w.definitions)
        self.src.line(f"*({VECTOR_TYPE}*)(out + {offset}) = {value};")

    def _outer_axes(self, d: DirectOperand, index: str, per_line: int) -> None:
        """Declare the walked axes outside a line (`d.outer`) of C index `index`, which
        counts `per_line` a line (1: lines; `d.line_panels`: panels)."""
        step = per_line
        for axis, extent, _ in reversed(d.outer):
            self.src.line(f"const int64_t i{axis} = {index} / {step}L % {extent}L;")
            step *= extent

    @contextmanager
    def _row_runs(self, d: DirectOperand) -> Iterator[None]:
        """A loop over the task's positions (B read in place: n0 ... n0 + nv) a run inside
        one output row at a time, its walked axes declared (q: the run's first position,
        w its column, `valid` how many it stores), whatever panels it spans: the stores
        then go a row at a time (56 positions on a 56 x 56 map, 7 whole AVX2 vectors)
        instead of a panel at a time, whose 16 left scalar tails where rows end
        mid-panel (half the epilogue, 2% of a 64-channel 3x3 convolution on 56 x 56 with AVX2)."""
        src, span = self.src, d.line_panels * d.panel
        with src.block("for (int64_t q = n0, qe; q < n0 + nv; q = qe)"):
            src.line(f"const int64_t j = q % {span}L;")
            if d.outer:
                src.line(f"const int64_t line = q / {span}L;")
            self._outer_axes(d, "line", 1)
            period = span if d.fold is None else d.fold[2]  # unfolded, a line is one row
            if d.fold is None:
                src.line("const int64_t w = j;")
            else:
                src.line(f"const int64_t i{d.fold[0]} = j / {period}L, w = j % {period}L;")
            # the run ends at its row's period, its line's end or the task's, whichever is first
            src.line(f"qe = q + ({period}L - w < {span}L - j ? {period}L - w : {span}L - j);")
            src.line("if (qe > n0 + nv) qe = n0 + nv;")
            src.line(f"const int64_t valid = j >= {d.line}L || w >= {d.width}L ? 0 : "
                     f"qe - q < {d.width}L - w ? qe - q : {d.width}L - w;")
            yield

    def _position_runs(self, d: DirectOperand, panel: str, body: Callable[[], None]) -> None:
        """For global panel number `panel` of `d`: its walked axes declared, then `body` for
        each run of positions inside one output row (l: the run's first position in the
        panel, w its column, `valid` how many it stores). On a plane at the period the
        positions between rows are skipped a run at a time."""
        src = self.src
        src.line(f"const int64_t panel = {panel};")
        self._outer_axes(d, "panel", d.line_panels)
        src.line(f"const int64_t j0 = panel % {d.line_panels}L * {d.panel}L;")
        src.line(f"const int64_t jn = {d.line}L - j0 < {d.panel}L ? {d.line}L - j0 : {d.panel}L;")
        if d.fold is None:
            src.line("int64_t w = j0;")
        else:
            axis, _, period = d.fold
            src.line(f"int64_t i{axis} = j0 / {period}L, w = j0 % {period}L;")
        with src.block("for (int64_t l = 0, run; l < jn; l += run)"):
            if d.fold is None:
                src.line("run = jn;")
                src.line("const int64_t valid = run;")
            else:
                src.line(f"run = jn - l < {period}L - w ? jn - l : {period}L - w;")
                src.line(f"const int64_t valid = w >= {d.width}L ? 0 : run < {d.width}L - w ? run : {d.width}L - w;")
            body()
            if d.fold is not None:
                src.line(f"w = 0; ++i{d.fold[0]};")

    def _next_panel(self, tasks_per_batch: int) -> str:
        """C pointer to the lines of the next B panel the micro-kernel call (ip, jp)
        prefetches: a call walks kc lines, so the panel's kc x NR floats take NR / LINE_FLOATS
        calls, ip = 0, 1, ... (the later calls prefetch them again, from L2). Past the last
        panel it points beyond B: a prefetch never faults."""
        calls = self.g.mk.cols // LINE_FLOATS
        panel = self._panel("b", "bp + (jp + 1) * kc", "n0", "(jp + 1)", tasks_per_batch)
        return f"{panel} + ip % {calls}L * kc * {LINE_FLOATS}L" if calls > 1 else panel

    def _micro_calls(self, a: str, b: str, pf: str) -> None:
        """The micro-kernel call for panel (ip, jp) (`pf`: the next B panel to prefetch, if
        it does): the tails' kernels where the panel is the last of M or N and only part of
        it is valid; over the list of its live taps where the panel of patches read in place
        skips some (c/direct.py)."""
        g, src = self.g, self.src
        row_tail, vector_tail = micro_tails(g.mk, g.m, g.n)
        tests = {"rows": f"m0 + (ip + 1) * {g.mk.rows}L > {g.m}L" if row_tail else None,
                 "vectors": f"n0 + (jp + 1) * {g.mk.cols}L > {g.n}L" if vector_tail else None}

        def calls(panel: str | None) -> None:  # over the live taps' list of `panel`, if given
            koff = f", {KOFF} + k0" if g.direct is not None else ""
            depth, live = "kc", panel is not None
            if panel is not None:
                depth, pairs = live_list(g.k, g.kc, panel, src)
                koff = f", {pairs}"
            prefetch = f", {pf}" if pf else ""
            local = self.local
            tile_block = f"ct + ip * {g.mk.rows * self.ldc}L + jp * {g.mk.cols}L"
            args = f"({depth}, {a}, {b}{koff}, {LOCAL_BLOCK if local else tile_block}, k0 == 0{prefetch});"

            def call(rows: int, vectors: int) -> None:
                src.line(micro_name(rows, vectors, g, self.prefix, live, local) + args)
                if local:
                    self._store_block(rows, vectors, LOCAL_BLOCK, g.mk.cols)
                elif self.stored_axis is not None:  # the sums are whole after the last K block
                    with src.block(f"if (k0 + kc >= {g.k}L)"):
                        self._store_block(rows, vectors, tile_block, self.ldc)

            def by_vectors(rows: int) -> None:
                if tests["vectors"] is None:
                    call(rows, g.mk.vectors)
                    return
                with src.block(f"if ({tests['vectors']})"):
                    call(rows, vector_tail)
                with src.block("else"):
                    call(rows, g.mk.vectors)
            if tests["rows"] is None:
                by_vectors(g.mk.rows)
                return
            with src.block(f"if ({tests['rows']})"):
                by_vectors(row_tail)
            with src.block("else"):
                by_vectors(g.mk.rows)
        if self.taps is None or g.direct is None:
            calls(None)
            return
        panel = f"n0 / {g.mk.cols}L + jp" if g.direct.side == "b" else f"m0 / {g.mk.rows}L + ip"
        with src.block(f"if ({LIVE_CLASS}[{panel}] == 0)"):
            calls(None)
        with src.block("else"):
            calls(panel)

    def _store_block(self, rows: int, vectors: int, block: str, stride: int) -> None:
        """post of the block the micro-kernel just wrote (panel ip, jp) at `block`, its rows
        `stride` floats apart, stored to `out` a vector at a time (`stores_from_registers`)."""
        src, c, mk, axis = self.src, self.c, self.g.mk, self.stored_axis
        assert axis is not None
        src.extend(vector_typedefs("float32", mk.lanes))
        offset = flat_offset(c.shape, [f"i{d}" for d in range(len(c.axes))])
        with src.block(f"for (int64_t r = 0; r < {rows}L; ++r)"):
            self._decode(f"(m0 + ip * {mk.rows}L + r)", self.m.rows)
            src.extend([f"const int64_t i{d} = 0;" for d in self.m.cols if d != axis])
            with src.block(f"for (int64_t v = 0; v < {vectors}L; ++v)"):
                src.line(f"const int64_t i{axis} = n0 + jp * {mk.cols}L + v * {mk.lanes}L;")
                acc = f"t{next(self.counter)}"
                src.line(f"const {VECTOR_TYPE} {acc} = *(const {VECTOR_TYPE}*)"
                         f"({block} + r * {stride}L + v * {mk.lanes}L);")
                self._store_vector(acc, offset, c.axes[axis].name)

    def _panel(self, side: str, scratch: str, origin: str, index: str, tasks_per_batch: int) -> str:
        """C pointer to the micro-kernel's current panel of `side`: in the per-call scratch
        (`scratch` * width), or in the operand packed at load (block origins are multiples
        of the panel width, so the panel is origin / width + index, at K offset k0)."""
        width = self.g.mk.rows if side == "a" else self.g.mk.cols
        if self.g.direct is not None and side == self.g.direct.side:
            base = panel_base(self.g.direct, f"{origin} / {width}L + {index}")
            return f"pad + ({base} - {ROWS_SHIFT})" if self.rows_shifted else f"pad + {base}"
        p = self.packed.get(side)
        if p is None:
            return f"{scratch} * {width}L"
        copy = f"(t / {tasks_per_batch}L) * {p.copy_floats}L + " if p.copies > 1 else ""
        return f"in{p.input} + {copy}(({origin} / {width}L + {index}) * {p.k}L + k0) * {width}L"

    def write_packers(self, symbol: str) -> None:
        """`void symbol_pack<input>(float* dst, const float* in<input>)` per packed operand: the
        per-call packing code run once over every panel and the whole K (kc = K, k0 = 0)."""
        src = self.src
        for p in self.packed.values():
            with (src.block(f"void {symbol}_pack{p.input}(float* restrict dst, const float* restrict in{p.input})"),
                  src.block(f"for (int64_t bt = 0; bt < {p.copies}L; ++bt)")):
                self._decode("bt", self.m.batch)
                src.line(f"const int64_t k0 = 0, kc = {p.k}L;")
                if p.side == "a":
                    src.line(f"const int64_t m0 = 0, mp = {p.panels}L;")
                    src.line(f"float* const ap = dst + bt * {p.copy_floats}L;")
                    self._pack_a()
                else:
                    src.line(f"const int64_t n0 = 0, np = {p.panels}L, nv = {self.g.n}L;")
                    src.line(f"float* const bp = dst + bt * {p.copy_floats}L;")
                    self._pack_b()

    def _pack_b(self) -> None:
        """B panels: bp[(p * kc + k) * NR + j] = rhs at col n0 + p * NR + j, reduce index k0 + k.

        Packed one row of B (one reduce index) at a time across the block's nv columns:
        the column walk's segments, and a padded operand's clipping, then span whole
        rows of the operand rather than one panel (a 3x3 convolution's patches
        were 25% of its time, packed a panel at a time), and each run is copied in
        pieces that end at panel boundaries, contiguous in both layouts."""
        src, nr = self.src, self.g.mk.cols
        with self._walk("k", "kc", "k0", range(len(self.c.reduce_axes)), "r"):
            src.line(f"float* const row = bp + k * {nr}L;")
            with src.block(f"for (int64_t j = nv; j < np * {nr}L; ++j)"):  # the last panel's padding
                src.line(f"{self._b_slot('j')} = 0.0f;")
            self._pack_row()

    def _b_slot(self, j: str) -> str:
        """C lvalue of column j (from n0) of the B row being packed (`row`)."""
        nr = self.g.mk.cols
        return f"row[({j}) / {nr}L * kc * {nr}L + ({j}) % {nr}L]"

    def _pack_row(self) -> None:
        """The nv columns of a row of B. A padded (affine) operand, such as a convolution's
        input patch, is walked in segments along its innermost axis; each segment is
        clipped to the run where every index is inside the tensor (affine indices are
        linear along the segment, so that run is found by a division per dimension),
        which is copied without bounds checks (loops gcc vectorizes), the rest filled
        with the pad value."""
        rhs, nr = self.m.rhs, self.g.mk.cols
        assert isinstance(rhs, Load)
        forms = [linear_form(i) for i in rhs.indices]
        split = rhs.pad is not None and self._segmented(self.m.cols) and all(f is not None for f in forms)
        inner = self.c.axes[[d for d in self.m.cols if self.c.axes[d].extent > 1][-1]].name

        def clip(first: str, start: str, run: str) -> tuple[str, str]:
            src = self.src
            src.line(f"int64_t lo = 0, hi = {run};")
            shape = self.c.inputs[rhs.input].shape
            for index, form, n in zip(rhs.indices, forms, shape, strict=True):
                assert form is not None
                v = self._emit(index, {**self.names, inner: first})
                a = form[1].get(inner, 0)
                src.extend(clip_lines(v, a, n))
            src.line("if (hi < lo) hi = lo;")
            pad = literal(rhs.pad, rhs.dtype)
            src.line(f"for (int64_t j = {start}; j < {start} + lo; ++j) {self._b_slot('j')} = {pad};")
            src.line(f"for (int64_t j = {start} + hi; j < {start} + {run}; ++j) {self._b_slot('j')} = {pad};")
            return "lo", "hi"

        def panel(first: str) -> None:  # dst[j] is column j while j stays in first's panel
            self.src.line(f"float* const dst = row + ({first}) / {nr}L * (kc - 1) * {nr}L;")

        load = Load(rhs.input, rhs.indices, rhs.dtype) if split else rhs
        lanes = self.g.mk.lanes
        vector = None
        if vectorizes(load, inner, self.c.inputs, "float32"):  # contiguous along the segment
            self.src.extend(vector_typedefs("float32", lanes))

            def copy(v: str) -> None:
                w = VectorWriter(self.c.inputs, self.names, self.counter, inner, lanes)
                value = w.emit_vector(load)
                self.src.extend(w.lines)
                self.src.line(f"*({VECTOR_TYPE}*)(dst + {v}) = {value};")
            vector = (lanes, copy)
        with self._walk("j", "nv", "n0", self.m.cols, segment=clip if split else None, chunk=(nr, panel),
                        vector=vector):
            self.src.line(f"dst[j] = {self._emit(load)};")

    def _segmented(self, axes: Sequence[int]) -> bool:
        """Whether `_walk` over spatial `axes` runs in segments."""
        extents = [e for e in self._extents(axes, "i") if e > 1]
        return len(extents) > 1 and extents[-1] >= MIN_SEGMENT

    def _pack_a(self) -> None:
        """A panels: ap[(p * kc + k) * MR + i] = lhs at row m0 + p * MR + i, reduce index k0 + k.
        A whole panel whose rows vectorize along K is packed `lanes` k at a time first
        (`_pack_a_vectors`); the rest element by element, from `kv` on."""
        src, mr = self.src, self.g.mk.rows
        flat = self._flat_reduce(self.m.lhs)
        with src.block("for (int64_t p = 0; p < mp; ++p)"):
            if self._pack_a_columns():
                with src.block("else"), src.block(f"for (int64_t i = 0; i < {mr}L; ++i)"):
                    self._pack_a_row(flat, "0")
                return
            vectors = self._pack_a_vectors(flat)
            with src.block(f"for (int64_t i = 0; i < {mr}L; ++i)"):
                self._pack_a_row(flat, "kv" if vectors else "0")

    def _pack_a_columns(self) -> bool:
        """Where panel p is whole and the operand is contiguous along its one row axis and
        not along its one reduce axis (a Gemm's transposed A), pack it a reduce index at a
        time: the MR rows of one k are MR consecutive floats, copied as a run gcc
        vectorizes, instead of each row walked along K a stride of M floats apart (Gemm
        transA 128 x 768 x 768 ran 0.93x onnxruntime so, 0.395 against 0.317 ms untransposed;
        two threads, Zen 5). Returns whether it wrote the whole panel's branch (the caller
        writes the partial panel's `else`)."""
        src, c, mr = self.src, self.c, self.g.mk.rows
        rows = [d for d in self.m.rows if c.axes[d].extent > 1]
        if len(rows) != 1 or len(c.reduce_axes) != 1:
            return False
        inputs, load = list(c.inputs), self.m.lhs
        if (not vectorizes(load, c.axes[rows[0]].name, inputs, "float32")
                or vectorizes(load, c.reduce_axes[0].name, inputs, "float32")):
            return False
        with src.block(f"if (m0 + (p + 1) * {mr}L <= {self.g.m}L)"):
            src.line(f"float* const dst = ap + p * kc * {mr}L;")
            with src.block("for (int64_t k = 0; k < kc; ++k)"):
                src.line(f"const int64_t {self.names[c.reduce_axes[0].name]} = k0 + k;")
                with src.block(f"for (int64_t i = 0; i < {mr}L; ++i)"):
                    self._decode(f"(m0 + p * {mr}L + i)", self.m.rows)
                    src.line(f"dst[k * {mr}L + i] = {self._emit(load)};")
        return True

    def _pack_a_vectors(self, flat: tuple[list[TensorType], Load] | None) -> bool:
        """Where panel p is whole and its rows are contiguous along K (a matmul's
        activations, a convolution's weights), pack it `lanes` reduce indices at a time:
        a vector from each row, transposed in registers (`transpose_lines`), each k's MR
        values stored as one whole vector. A vector's lanes past MR spill onto the next k's
        slots, which a later store writes, so the loop stops while enough k remain after
        it (their elements packed one by one). Declares `kv`, the k it reached; returns
        whether it wrote the loop (MR at most `lanes`, a vectorizable operand)."""
        src, mr, lanes = self.src, self.g.mk.rows, self.g.mk.lanes
        if flat is not None:
            inputs, load, var, ranges = flat[0], flat[1], FLAT_K, {**self.ranges, FLAT_K: (0, self.g.k - 1)}
        elif len(self.c.reduce_axes) == 1:
            inputs, load, var, ranges = list(self.c.inputs), self.m.lhs, self.c.reduce_axes[0].name, self.ranges
        else:
            return False
        if mr > lanes or not vectorizes(load, var, inputs, "float32"):
            return False
        after = -(-(lanes - mr) // mr)  # k whose slots the last vector's spare lanes reach
        rows = [f"v{t}" for t in range(lanes)]
        src.line("int64_t kv = 0;")
        with src.block(f"if (m0 + (p + 1) * {mr}L <= {self.g.m}L)"):
            src.extend(vector_typedefs("float32", lanes))
            src.line(f"float* const dst = ap + p * kc * {mr}L;")
            with src.block(f"for (; kv + {lanes + after}L <= kc; kv += {lanes}L)"):
                src.line(f"{VECTOR_TYPE} {', '.join(rows)};")
                for i in range(mr):
                    with src.block(""):
                        src.line(f"const int64_t mi = m0 + p * {mr}L + {i}L;")
                        self._decode("mi", self.m.rows)
                        w = VectorWriter(inputs, {**self.names, var: "(k0 + kv)"}, self.counter, var, lanes)
                        w.ranges = ranges
                        value = w.emit_vector(load)
                        src.extend(w.lines)
                        src.line(f"{rows[i]} = {value};")
                src.extend([f"{v} = ({VECTOR_TYPE}){{0}};" for v in rows[mr:]])
                src.extend(transpose_lines(rows, lanes))
                src.extend([f"*({VECTOR_TYPE}*)(dst + (kv + {t}L) * {mr}L) = {v};" for t, v in enumerate(rows)])
        return True

    def _pack_a_row(self, flat: tuple[list[TensorType], Load] | None, first: str) -> None:
        """Row i of panel p, element by element, from reduce index k0 + `first` on."""
        src, mr = self.src, self.g.mk.rows
        src.line(f"const int64_t mi = m0 + p * {mr}L + i;")
        src.line(f"float* const dst = ap + p * kc * {mr}L + i;")
        with src.block(f"if (mi < {self.g.m}L)"):
            self._decode("mi", self.m.rows)
            if flat is not None:  # K contiguous in the operand: one index, no carries
                inputs, load = flat
                with src.block(f"for (int64_t k = {first}; k < kc; ++k)"):
                    ranges = {**self.ranges, FLAT_K: (0, self.g.k - 1)}
                    w = ExprWriter(inputs, {**self.names, FLAT_K: "(k0 + k)"}, self.counter, ranges)
                    value = w.emit(load)
                    src.extend(w.lines)
                    src.line(f"dst[k * {mr}L] = {value};")
            elif first != "0":  # one reduce axis: its index is k0 + k
                with src.block(f"for (int64_t k = {first}; k < kc; ++k)"):
                    src.line(f"const int64_t {self.names[self.c.reduce_axes[0].name]} = k0 + k;")
                    src.line(f"dst[k * {mr}L] = {self._emit(self.m.lhs)};")
            else:
                with self._walk("k", "kc", "k0", range(len(self.c.reduce_axes)), "r"):
                    src.line(f"dst[k * {mr}L] = {self._emit(self.m.lhs)};")
        with src.block("else"), src.block("for (int64_t k = 0; k < kc; ++k)"):
            src.line(f"dst[k * {mr}L] = 0.0f;")

    def _flat_reduce(self, operand: Expr) -> tuple[list[TensorType], Load] | None:
        """The operand read through one flat K index (`FLAT_K`), when its last indices are
        exactly the reduce axes, in order, over whole dimensions of their extents (a
        convolution's weights): the input reshaped to match, and the load."""
        red = self.c.reduce_axes
        if (not isinstance(operand, Load) or len(red) < 2 or len(operand.indices) < len(red)
                or FLAT_K in self.ranges):
            return None
        lead = len(operand.indices) - len(red)
        shape = self.c.inputs[operand.input].shape
        for a, e, n in zip(red, operand.indices[lead:], shape[lead:], strict=True):
            if not (isinstance(e, Var) and e.name == a.name and n == a.extent):
                return None
        inputs = list(self.c.inputs)
        t = inputs[operand.input]
        inputs[operand.input] = TensorType((*shape[:lead], math.prod(shape[lead:])), t.dtype)
        return inputs, Load(operand.input, (*operand.indices[:lead], Var(FLAT_K)), operand.dtype)

    def _epilogue(self) -> None:
        """post(acc) for the valid part of the tile, stored to `out`."""
        src, c = self.src, self.c
        offset = flat_offset(c.shape, [f"i{d}" for d in range(len(c.axes))])
        with src.block("for (int64_t i = 0; i < mv; ++i)"):
            self._decode("(m0 + i)", self.m.rows)
            cols = [a for a in self.m.cols if c.axes[a].extent > 1]
            vector = self._vector_epilogue(offset, lambda v: f"i * {self.ldc}L + {v}", cols[-1]) if cols else None
            with self._walk("j", "nv", "n0", self.m.cols, vector=vector):
                src.line(f"out[{offset}] = {self._post_of(f'ct[i * {self.ldc}L + j]')};")

    def _vector_epilogue(self, offset: str, at: Callable[[str], str],
                         axis: int) -> tuple[int, Callable[[str], None]] | None:
        """A vector step storing post(acc) to `out` at `offset` for a whole vector of
        positions along output axis `axis` (its first one declared), reading acc from
        ct[at(v)] on, where `post` calls a vector function (c/vector_functions.py: a GELU,
        a SiLU) and `axis` is the innermost output axis (contiguous); else None, and gcc
        vectorizes the scalar loop (with libmvec calls for a transcendental)."""
        c, lanes, post = self.c, self.g.mk.lanes, self.c.post
        var = c.axes[axis].name
        if (post is None or c.dtype != "float32" or axis != len(c.axes) - 1
                or not any(isinstance(e, Call) and e.op in VECTOR_FUNCTIONS for e in walk(post))
                or not vectorizes(post, var, c.inputs, "float32", {ACC})):
            return None
        self.src.extend(vector_typedefs("float32", lanes))

        def step(v: str) -> None:
            acc = f"t{next(self.counter)}"
            self.src.line(f"const {VECTOR_TYPE} {acc} = *(const {VECTOR_TYPE}*)(ct + {at(v)});")
            self._store_vector(acc, offset, var)
        return lanes, step
