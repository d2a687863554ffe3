"""Per-channel convolutions plane by plane: rendering the plan's `PlaneConv`
(compiler/schedule/plane_conv.py decides it and lays the planes out).

One task per plane, split statically among the team. Each thread owns a scratch
block: the padded, phase-split copy of the plane (filled with the pad value once per
call; per plane only the input's own elements are copied in), and the computed line
of outputs. The line is walked in vectors of the target's lanes (GCC vector
extensions), four at a time so that four chains of multiply-adds overlap, each tap a
broadcast times an unaligned load at its offset (a static table); then `post` is
applied to each output row's valid positions and stored.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.codegen.c.team import mark_used, thread_scratch
from compiler.codegen.cexpr import ExprWriter, flat_offset, literal, new_counter
from compiler.codegen.csource import CSource
from compiler.ir.te import ACC, Compute
from compiler.schedule.plane_conv import PlaneConv

GROUP = 4  # vectors computed together: independent chains hide the multiply-add latency
KOFF, TOFF = "tf_pkoff", "tf_ptoff"


def render_plane(c: Compute, p: PlaneConv, params: Sequence[str], header: str, parallel: bool,
                 src: CSource) -> bool:
    """Append the offset tables and the team function (`header`, parameters `params`) of
    `c` computed as plane layout `p` says; returns whether the planes are split among
    the team."""
    src.line(f"typedef float tf_pv __attribute__((vector_size({4 * p.lanes})));")
    src.line(f"typedef float tf_pu __attribute__((vector_size({4 * p.lanes}), aligned(4), may_alias));")
    for name, values in ((KOFF, p.koff), (TOFF, p.toff)):
        src.line(f"static const int32_t {name}[{len(values)}] = {{{', '.join(str(v) for v in values)}}};")
    planes = 1
    for _, extent, _, _ in p.plane_axes:
        planes *= extent
    split = parallel and planes > 1
    with src.block(header):
        mark_used(src, params)
        with thread_scratch(src, split, "cp", p.copy_floats + p.vectors * p.lanes):
            src.line(f"float* const res = cp + {p.copy_floats};")
            src.line(f"for (int64_t q = 0; q < {p.copy_floats}L; ++q) cp[q] = {literal(p.pad_value, 'float32')};")
            if split:
                src.line("#pragma omp for schedule(static) nowait")
            with src.block(f"for (int64_t pl = 0; pl < {planes}L; ++pl)"):
                _plane_indices(c, p, src)
                _copy(p, src)
                _line(p, src)
                _store(c, p, src)
    return split


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
    data = " + ".join([f"{p.data_base}L", *(f"i{d} * {s}L" for d, _, s, _ in p.plane_axes)])
    taps = " + ".join([f"{p.taps_base}L", *(f"i{d} * {s}L" for d, _, _, s in p.plane_axes)])
    src.line(f"const float* const dp = in{p.data} + {data};")
    src.line(f"const float* const tp = in{p.taps} + {taps};")


def _copy(p: PlaneConv, src: CSource) -> None:
    """The plane's own elements into the copy (the pad stays around them), one loop nest
    per phase: rows and columns `sh` and `sw` apart in the input, consecutive in the copy
    (a copy that placed each element by its phase, computed per element, took 10 us a
    112 x 112 plane)."""
    (rows, cols), (sh, sw) = p.in_plane, p.phases
    qr, qc = p.quarter
    for py, (ys, ny) in enumerate(_phase_runs(p.lo[0], p.reach[0], rows, sh)):
        for px, (xs, nx) in enumerate(_phase_runs(p.lo[1], p.reach[1], cols, sw)):
            if not ny or not nx:
                continue
            first = (py * sw + px) * qr * qc + (ys - p.lo[0]) // sh * qc + (xs - p.lo[1]) // sw
            with src.block(f"for (int64_t q = 0; q < {ny}L; ++q)"):
                src.line(f"const float* const s = dp + ({ys}L + q * {sh}L) * {cols}L + {xs}L;")
                src.line(f"float* const d = cp + {first}L + q * {qc}L;")
                with src.block(f"for (int64_t e = 0; e < {nx}L; ++e)"):
                    src.line(f"d[e] = s[e * {sw}L];")


def _phase_runs(lo: int, reach: int, size: int, stride: int) -> list[tuple[int, int]]:
    """Per phase, the first input index in [0, size) the copy holds at that phase, and
    how many (every `stride`-th) there are."""
    first, end = max(0, lo), min(size, lo + reach)
    runs = []
    for phase in range(stride):
        start = first + (phase - (first - lo)) % stride
        runs.append((start, max(0, -(-(end - start) // stride))))
    return runs


def _line(p: PlaneConv, src: CSource) -> None:
    """`res`: the plane's line of positions, GROUP vectors at a time, then one at a time."""
    lanes, line, taps = p.lanes, p.vectors * p.lanes, len(p.koff)
    src.line(f"float tk[{taps}];")
    with src.block(f"for (int64_t k = 0; k < {taps}L; ++k)"):
        src.line(f"tk[k] = tp[{TOFF}[k]];")
    src.line("int64_t j = 0;")
    for group in (GROUP, 1):
        accs = [f"a{g}" for g in range(group)]
        with src.block(f"for (; j + {group * lanes}L <= {line}L; j += {group * lanes}L)"):
            src.line(f"tf_pv {', '.join(f'{a} = (tf_pv){{0}}' for a in accs)};")
            src.line(f"#pragma GCC unroll {min(taps, 16)}")
            with src.block(f"for (int64_t k = 0; k < {taps}L; ++k)"):
                src.line(f"const float* const x = cp + {KOFF}[k] + j;")
                src.extend([f"{a} += tk[k] * *(const tf_pu*)(x + {g * lanes});" for g, a in enumerate(accs)])
            src.extend([f"*(tf_pv*)(res + j + {g * lanes}) = {a};" for g, a in enumerate(accs)])


def _store(c: Compute, p: PlaneConv, src: CSource) -> None:
    """post(acc) of each output row's valid positions, stored to `out`."""
    h, w = len(c.axes) - 2, len(c.axes) - 1
    names = {a.name: f"i{d}" for d, a in enumerate(c.axes)}
    offset = flat_offset(c.shape, [f"i{d}" for d in range(len(c.axes))])
    counter = new_counter()
    with src.block(f"for (int64_t i{h} = 0; i{h} < {p.out_plane[0]}L; ++i{h})"):
        src.line("#pragma omp simd")
        with src.block(f"for (int64_t i{w} = 0; i{w} < {p.out_plane[1]}L; ++i{w})"):
            value = f"res[i{h} * {p.quarter[1]}L + i{w}]"
            if c.post is not None:
                writer = ExprWriter(c.inputs, {**names, ACC: value}, counter,
                                    {a.name: (0, a.extent - 1) for a in c.axes})
                value = writer.emit(c.post)
                src.extend(writer.lines)
            src.line(f"out[{offset}] = {value};")
