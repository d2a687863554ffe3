"""Per-channel convolutions plane by plane: rendering the plan's `PlaneConv`
(compiler/schedule/plane_conv.py decides it and lays the planes out).

One task per plane, split statically among the team. Each thread owns a scratch
block: two padded, phase-split copies (filled with the pad value once per call; per
plane only the input's own elements are copied in), and the computed line of outputs.
While a thread computes one plane it has already copied the next into the other copy:
vector loads of elements stored a moment before by narrower stores stall (no store
forwarding), which cost a 7 x 7 plane more than its multiply-adds; meanwhile the plane
after that is prefetched, so that its copy does not wait on memory (a 3 x 3 stride-2
depthwise convolution over 96 planes of 112 x 112, one thread, Zen 4: 243 -> 228 us). The line is walked
in vectors of the target's lanes (GCC vector extensions), four at a time so that four
chains of multiply-adds overlap, each tap a broadcast times an unaligned load at its
offset (a static table). `post` is applied to those vectors where it reads nothing that
moves within the plane (a Clip, a SiLU, a bias), else to each valid output; then each
output row's valid positions are stored.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from compiler.codegen.c.gemm import LINE_FLOATS, SCRATCH
from compiler.codegen.c.team import mark_used, thread_scratch
from compiler.codegen.c.vector import VECTOR_TYPE, VectorWriter, vector_typedefs, vectorizes
from compiler.codegen.cexpr import ExprWriter, flat_offset, literal, new_counter
from compiler.codegen.csource import CSource
from compiler.ir.contraction import expr_vars
from compiler.ir.te import ACC, Compute, Expr
from compiler.schedule.plane_conv import PlaneConv

GROUP = 4  # vectors computed together: independent chains hide the multiply-add latency


def render_plane(c: Compute, p: PlaneConv, params: Sequence[str], header: str, parallel: bool,
                 src: CSource, prefix: str = "tf", team: bool = True) -> bool:
    """Append the offset tables (named after `prefix`: one pair per plane convolution in
    the unit) and the team function (`header`, parameters `params`) of `c` computed as
    plane layout `p` says; returns whether the planes are split among the team. Without
    `team`, `header` runs every plane on the calling thread (a chain's member), in the
    `p.scratch_floats` of scratch its last parameter (`SCRATCH`) points to."""
    src.extend(vector_typedefs("float32", p.lanes))
    koff, toff = f"{prefix}_pkoff", f"{prefix}_ptoff"
    for name, values in ((koff, p.koff), (toff, p.toff)):
        src.line(f"static const int32_t {name}[{len(values)}] = {{{', '.join(str(v) for v in values)}}};")
    planes = 1
    for _, extent, _, _ in p.plane_axes:
        planes *= extent
    split = team and parallel and planes > 1
    with src.block(header):
        mark_used(src, params)
        with thread_scratch(src, split, "cp", p.scratch_floats) if team else given_scratch(src, "cp"):
            src.line(f"float* const res = cp + {2 * p.copy_floats};")
            src.line(f"for (int64_t q = 0; q < {2 * p.copy_floats}L; ++q) cp[q] = {literal(p.pad_value, 'float32')};")
            src.line("int64_t copied = -1;  /* the plane last copied in */")
            if split:
                src.line("#pragma omp for schedule(static) nowait")
            with src.block(f"for (int64_t pl = 0; pl < {planes}L; ++pl)"):
                _plane_indices(c, p, src)
                with src.block("if (copied != pl)"):  # a thread's first plane
                    _copy(p, src, "pl", f"cp + (pl & 1) * {p.copy_floats}L")
                with src.block(f"if (pl + 1 < {planes}L)"):
                    _copy(p, src, "pl + 1", f"cp + ((pl + 1) & 1) * {p.copy_floats}L")
                    src.line("copied = pl + 1;")
                src.line(f"const float* const xp = cp + (pl & 1) * {p.copy_floats}L;")
                post = vector_post(c, c.axes[-1].name)
                _line(c, p, src, post, koff, toff, planes)
                _store(c, p, src, post)
    return split


@contextmanager
def given_scratch(src: CSource, name: str) -> Iterator[None]:
    """A block with `float* name`: the scratch the caller handed in."""
    with src.block(""):
        src.line(f"float* const {name} = {SCRATCH};")
        yield


def _plane_indices(c: Compute, p: PlaneConv, src: CSource) -> None:
    """Declare every plane axis `i<d>` of plane `pl`, and the plane's data and taps bases."""
    walked = {d: extent for d, extent, _, _ in p.plane_axes}
    inner = 1
    for d in reversed(range(len(c.axes) - 2)):
        if d not in walked:
            src.line(f"const int64_t i{d} = 0;")
            continue
        src.line(f"const int64_t i{d} = pl / {inner}L % {walked[d]}L;")
        inner *= walked[d]
    taps = " + ".join([f"{p.taps_base}L", *(f"i{d} * {s}L" for d, _, _, s in p.plane_axes)])
    src.line(f"const float* const tp = in{p.taps} + {taps};")


def _data_offset(p: PlaneConv, plane: str) -> str:
    """C expression: offset in the data input of plane number `plane`'s element (0, 0)."""
    terms, inner = [f"{p.data_base}L"], 1
    for _, extent, step, _ in reversed(p.plane_axes):
        terms.append(f"({plane}) / {inner}L % {extent}L * {step}L")
        inner *= extent
    return " + ".join(terms)


def _copy(p: PlaneConv, src: CSource, plane: str, copy: str) -> None:
    """Plane number `plane`'s own elements into the copy at `copy` (the pad stays around
    them): the input read once, in order, a group of `sh` rows (one of each row phase)
    at a time, each row's `sw` column phases stored by one loop, consecutive in the
    copy. A loop nest per phase, each reading rows `sh` apart and columns `sw` apart,
    read every row `sw` times and left each loop a scalar tail: a 3 x 3 stride-2
    depthwise convolution's copy of 96 planes of 112 x 112 took half its time (Zen 4,
    one thread: the convolution 275 -> 245 us with the columns' loops merged). (A copy
    that placed each element by its phase, computed per element, took 10 us a
    112 x 112 plane.)"""
    (rows, cols), (sh, sw) = p.in_plane, p.phases
    qr, qc = p.quarter
    src.line(f"const float* const dp = in{p.data} + {_data_offset(p, plane)};")
    src.line(f"float* const to = {copy};")
    columns = [(px, xs, nx) for px, (xs, nx) in enumerate(_phase_runs(p.lo[1], p.reach[1], cols, sw)) if nx]
    lines = sorted(((ys, py, ny) for py, (ys, ny) in enumerate(_phase_runs(p.lo[0], p.reach[0], rows, sh)) if ny))
    if not columns or not lines:
        return
    x0, common = min(xs for _, xs, _ in columns), min(nx for _, _, nx in columns)

    def row(ys: int, py: int) -> None:  # input row ys + q * sh, all its column phases
        with src.block(""):
            src.line(f"const float* const s = dp + ({ys}L + q * {sh}L) * {cols}L + {x0}L;")
            src.line(f"float* const d = to + {py * sw * qr * qc + (ys - p.lo[0]) // sh * qc}L + q * {qc}L;")
            dests = [(f"d[{px * qr * qc + (xs - p.lo[1]) // sw}L + e]", f"s[e * {sw}L + {xs - x0}L]")
                     for px, xs, _ in columns]
            with src.block(f"for (int64_t e = 0; e < {common}L; ++e)"):
                src.extend([f"{d} = {s};" for d, s in dests])
            for (_, _, nx), (d, s) in zip(columns, dests, strict=True):
                if nx > common:
                    with src.block(f"for (int64_t e = {common}L; e < {nx}L; ++e)"):
                        src.line(f"{d} = {s};")
    rows_common = min(ny for _, _, ny in lines)
    with src.block(f"for (int64_t q = 0; q < {rows_common}L; ++q)"):
        for ys, py, _ in lines:
            row(ys, py)
    for ys, py, ny in lines:  # a phase's last row past the others'
        if ny > rows_common:
            with src.block(f"for (int64_t q = {rows_common}L; q < {ny}L; ++q)"):
                row(ys, py)


def held(lo: int, reach: int, size: int) -> tuple[int, int]:
    """The input indices [first, end) the copy holds along a dimension of `size`: the
    window's reach from `lo`, clipped to the input."""
    return max(0, lo), min(size, lo + reach)


def _phase_runs(lo: int, reach: int, size: int, stride: int) -> list[tuple[int, int]]:
    """Per phase, the first input index in [0, size) the copy holds at that phase, and
    how many (every `stride`-th) there are."""
    first, end = held(lo, reach, size)
    runs = []
    for phase in range(stride):
        start = first + (phase - (first - lo)) % stride
        runs.append((start, max(0, -(-(end - start) // stride))))
    return runs


def vector_post(c: Compute, var: str) -> Expr | None:
    """`post`, where it can be applied to whole vectors along axis `var` (the plane's
    columns, or its channels): it reads nothing that moves along the plane's rows or
    columns."""
    plane = {a.name for a in c.axes[-2:]}
    if c.post is None or expr_vars(c.post) & plane or not vectorizes(c.post, var, c.inputs, "float32", {ACC}):
        return None
    return c.post


def with_vector_post(c: Compute, post: Expr | None, acc: str, names: Mapping[str, str], var: str, lanes: int,
                     counter: Iterator[int], src: CSource) -> str:
    """C vector expression: accumulator `acc` with `post` applied along axis `var` (its
    statements appended to `src`), or `acc` itself without a `post`."""
    if post is None:
        return acc
    w = VectorWriter(c.inputs, {**names, ACC: acc}, counter, var, lanes, {ACC})
    value = w.emit_vector(post)
    src.extend(w.lines)
    src.define(w.definitions)
    return value


def _line(c: Compute, p: PlaneConv, src: CSource, post: Expr | None, koff: str, toff: str,
          planes: int) -> None:
    """`res`: the plane's line of positions, GROUP vectors at a time, then the vectors left
    over as one group (`post` applied, where given), the input rows of the plane after
    next (the next one is copied already) prefetched along the way, spread over the
    groups. (Left over one at a time, each was one chain of a multiply-add per tap: a 7x7
    depthwise convolution of 384 planes of 14 x 14, 18 vectors a plane, 215 -> 203 us
    with its last two as a group, one thread, Zen 4.)"""
    lanes, line, taps = p.lanes, p.vectors * p.lanes, len(p.koff)
    names = {a.name: f"i{d}" for d, a in enumerate(c.axes[:-2])}
    counter = new_counter()
    src.line(f"float tk[{taps}];")
    with src.block(f"for (int64_t k = 0; k < {taps}L; ++k)"):
        src.line(f"tk[k] = tp[{toff}[k]];")
    groups, per_group = line // (GROUP * lanes), 0  # cache lines prefetched a group (0: none)
    if groups and planes > 2:
        rows, cols = p.in_plane
        first, end = held(p.lo[0], p.reach[0], rows)
        cache_lines = -(-(end - first) * cols // LINE_FLOATS)
        per_group = -(-cache_lines // groups)
        src.line(f"const char* const pf = pl + 2 < {planes}L ? "
                 f"(const char*)(in{p.data} + {_data_offset(p, 'pl + 2')} + {first * cols}L) : 0;")
    src.line("int64_t j = 0;")
    for group in (GROUP, p.vectors % GROUP):
        if not group:
            continue
        accs = [f"a{g}" for g in range(group)]
        with src.block(f"for (; j + {group * lanes}L <= {line}L; j += {group * lanes}L)"):
            if group == GROUP and per_group:
                with src.block(f"if (pf) for (int64_t u = 0; u < {per_group}L; ++u)"):
                    src.line(f"__builtin_prefetch(pf + (j / {GROUP * lanes}L * {per_group}L + u) * {4 * LINE_FLOATS}L, 0, 2);")
            src.line(f"{VECTOR_TYPE} {', '.join(f'{a} = ({VECTOR_TYPE}){{0}}' for a in accs)};")
            src.line(f"#pragma GCC unroll {min(taps, 16)}")
            with src.block(f"for (int64_t k = 0; k < {taps}L; ++k)"):
                src.line(f"const float* const x = xp + {koff}[k] + j;")
                src.extend([f"{a} += tk[k] * *(const {VECTOR_TYPE}*)(x + {g * lanes});" for g, a in enumerate(accs)])
            for g, a in enumerate(accs):
                value = with_vector_post(c, post, a, names, c.axes[-1].name, lanes, counter, src)
                src.line(f"*({VECTOR_TYPE}*)(res + j + {g * lanes}) = {value};")


def _store(c: Compute, p: PlaneConv, src: CSource, post: Expr | None) -> None:
    """Each output row's valid positions stored to `out` (post(acc) computed here where
    the line's vectors do not have it yet)."""
    h, w = len(c.axes) - 2, len(c.axes) - 1
    names = {a.name: f"i{d}" for d, a in enumerate(c.axes)}
    offset = flat_offset(c.shape, [f"i{d}" for d in range(len(c.axes))])
    counter = new_counter()
    with src.block(f"for (int64_t i{h} = 0; i{h} < {p.out_plane[0]}L; ++i{h})"):
        src.line("#pragma omp simd")
        with src.block(f"for (int64_t i{w} = 0; i{w} < {p.out_plane[1]}L; ++i{w})"):
            value = f"res[i{h} * {p.quarter[1]}L + i{w}]"
            if c.post is not None and post is None:
                writer = ExprWriter(c.inputs, {**names, ACC: value}, counter,
                                    {a.name: (0, a.extent - 1) for a in c.axes})
                value = writer.emit(c.post)
                src.extend(writer.lines)
            src.line(f"out[{offset}] = {value};")
