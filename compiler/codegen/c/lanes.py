"""Per-channel convolutions with channels in the vector lanes: rendering the plan's
`LaneConv` (compiler/schedule/lane_conv.py decides it and lays the copy out).

One task per `lanes` consecutive channels (and outer plane), split statically among the
team. Each thread owns a scratch block: the padded copy (a vector of the task's channels
at each position, filled with the pad value once per call; per task only the input's own
positions are written), the results and the taps. A task
1. gathers each tap's `lanes` channels into one vector, or, where the taps are a weight
   (`LaneConv.packed_taps`), reads the vectors that `<symbol>_pack<taps>` laid out once
   at load (compiler/schedule/prepack.py);
2. transposes its input planes into the copy, `lanes` positions of `lanes` channels at a
   time: one load per channel, log2(lanes) rounds of two-vector shuffles
   (c/vector.py `transpose_lines`), one store per position at its place in the copy
   (a static table; positions outside the windows' reach go to a slot past the copy);
3. computes the output positions GROUP at a time, in flat order across rows (a static
   table holds each position's first copy element), each tap one vector of taps times
   one aligned load per position, `post` applied to the vectors where it reads nothing
   that moves within a plane;
4. transposes the results back and stores each channel's run of positions (the last,
   partial block lane by lane), `post` applied there where it could not be on vectors.
Where the lanes do not divide the channels, the last task's spare lanes read its last
channel again (no load past the tensors) and are not stored; its epilogue runs per element.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from compiler.codegen.c.claim import claim_rows
from compiler.codegen.c.plane import given_scratch, held, vector_post, with_vector_post
from compiler.codegen.c.team import mark_used, thread_scratch
from compiler.codegen.c.vector import VECTOR_TYPE, transpose_lines, vector_typedefs
from compiler.codegen.cexpr import ExprWriter, flat_offset, literal, new_counter
from compiler.codegen.csource import CSource
from compiler.ir.te import ACC, Compute, Expr
from compiler.schedule.lane_conv import LaneConv

GROUP = 8  # positions computed together: chains enough for two multiply-add pipes


def render_lanes(c: Compute, lc: LaneConv, params: Sequence[str], header: str, parallel: bool,
                 src: CSource, symbol: str, prefix: str = "tf", team: bool = True) -> bool:
    """Append the tables (named after `prefix`), the team function (`header`, parameters
    `params`) of `c` computed as `lc` lays it out and, where its taps come packed, their
    load-time packing function (`symbol`_pack<taps>); returns whether the tasks are split
    among the team. Without `team`, `header` runs every task on the calling thread in the
    `lc.scratch_floats` of scratch its last parameter points to."""
    if lc.packed_taps and not team:
        raise ValueError("a per-channel convolution run by the calling thread gathers its taps itself")
    lanes = lc.lanes
    src.extend(vector_typedefs("float32", lanes))
    rows, cols = lc.in_plane
    dst, base = f"{prefix}_ldst", f"{prefix}_lbase"
    src.line(f"static const int32_t {dst}[{rows * cols}] = {{{', '.join(map(str, _copy_places(lc)))}}};")
    src.line(f"static const int32_t {base}[{lc.positions}] = {{{', '.join(map(str, _position_bases(lc)))}}};")
    split = team and parallel and lc.groups > 1
    with src.block(header):
        mark_used(src, params)
        with thread_scratch(src, split, "cp", lc.scratch_floats) if team else given_scratch(src, "cp"):
            copy_floats = lc.copy_positions * lanes
            src.line(f"float* const res = cp + {copy_floats}L;")
            if not lc.packed_taps:
                src.line(f"float* const wk = res + {-(-lc.positions // lanes) * lanes * lanes}L;")
            _fill_pad(lc, src)
            if split:
                src.line("#pragma omp for schedule(static) nowait")
            with src.block(f"for (int64_t g = 0; g < {lc.groups}L; ++g)"):
                _task_indices(c, lc, src)
                _claim_output(c, lc, src, team)
                if lc.packed_taps:
                    src.line(f"const float* const wk = in{lc.taps} + g % {lc.channel_blocks}L * "
                             f"{len(lc.toff) * lanes}L;")
                else:
                    _gather_taps(lc, src)
                _copy_in(lc, src, dst)
                # a partial task's spare lanes would read past the epilogue's operands
                post = None if lc.partial else vector_post(c, c.axes[lc.channel[0]].name)
                _compute(c, lc, src, base, post)
                _store(c, lc, src, post)
    if lc.packed_taps:
        _write_tap_packer(lc, src, symbol)
    return split


def _fill_pad(lc: LaneConv, src: CSource) -> None:
    """The pad value into the copy's positions that no input position fills (the rows above
    and below the input's, and the columns beside them): once per call, since the tasks
    write only the input's own positions. (Filling the whole copy took a 28 x 28 map's
    58 KB per call, as much as a tenth of a small convolution.)"""
    (rows, cols), (ly, lx), (ry, rx), lanes = lc.in_plane, lc.lo, lc.reach, lc.lanes
    (first_y, end_y), (first_x, end_x) = held(ly, ry, rows), held(lx, rx, cols)  # input indices the copy holds
    y0, y1 = min(first_y - ly, ry), max(end_y - ly, 0)
    x0, x1 = min(first_x - lx, rx), max(end_x - lx, 0)
    pad = literal(lc.pad_value, "float32")
    full = [(0, y0), (max(y0, y1), ry)]  # rows no input row lands in, whole
    for first, end in full:
        if end > first:
            src.line(f"for (int64_t q = {first * rx * lanes}L; q < {end * rx * lanes}L; ++q) cp[q] = {pad};")
    if y1 > y0 and (x0 > 0 or x1 < rx):
        with src.block(f"for (int64_t r = {y0}L; r < {y1}L; ++r)"):
            for first, end in ((0, x0), (max(x0, x1), rx)):
                if end > first:
                    src.line(f"for (int64_t q = {first * lanes}L; q < {end * lanes}L; ++q) cp[r * {rx * lanes}L + q] = {pad};")


def _copy_places(lc: LaneConv) -> list[int]:
    """Per input plane position, the float offset of its vector in the copy (outside the
    windows' reach: the slot past the copy)."""
    (rows, cols), (ly, lx), (ry, rx) = lc.in_plane, lc.lo, lc.reach
    dump = (lc.copy_positions - 1) * lc.lanes
    return [((y - ly) * rx + x - lx) * lc.lanes if 0 <= y - ly < ry and 0 <= x - lx < rx else dump
            for y in range(rows) for x in range(cols)]


def _position_bases(lc: LaneConv) -> list[int]:
    """Per output position (flat), the float offset in the copy of its window's origin."""
    (oh, ow), (sh, sw), rx = lc.out_plane, lc.strides, lc.reach[1]
    return [(y * sh * rx + x * sw) * lc.lanes for y in range(oh) for x in range(ow)]


def _first_channel(lc: LaneConv, block: str, src: CSource) -> None:
    """Declare the channel axis `i<d>` at the first channel of channel block `block` (a C
    expression) and, where the lanes do not divide the channels, `nv`: the block's
    channels (its spare lanes read its last one again)."""
    d, extent = lc.channel[:2]
    src.line(f"const int64_t i{d} = {block} * {lc.lanes}L;")
    if lc.partial:
        src.line(f"const int64_t nv = {extent}L - i{d} < {lc.lanes}L ? {extent}L - i{d} : {lc.lanes}L;")


def _task_indices(c: Compute, lc: LaneConv, src: CSource) -> None:
    """Declare every plane axis `i<d>` of task `g` (the channel axis at the task's first
    channel), and its data pointer `dp` and, unless they come packed, its taps pointer `tp`
    (channel 0 of the task)."""
    d = lc.channel[0]
    blocks = lc.channel_blocks
    _first_channel(lc, f"g % {blocks}L", src)
    walked = {pos: ext for pos, ext, _, _ in lc.outer_axes}
    inner = blocks
    for a in reversed(range(len(c.axes) - 2)):
        if a == d:
            continue
        if a not in walked:
            src.line(f"const int64_t i{a} = 0;")
            continue
        src.line(f"const int64_t i{a} = g / {inner}L % {walked[a]}L;")
        inner *= walked[a]
    axes = (*lc.outer_axes, lc.channel)
    src.line(f"const float* const dp = in{lc.data} + "
             + " + ".join([f"{lc.data_base}L", *(f"i{a} * {s}L" for a, _, s, _ in axes)]) + ";")
    if not lc.packed_taps:
        src.line(f"const float* const tp = in{lc.taps} + "
                 + " + ".join([f"{lc.taps_base}L", *(f"i{a} * {s}L" for a, _, _, s in axes)]) + ";")


def _gather_taps(lc: LaneConv, src: CSource) -> None:
    """`wk`: each tap's value for the task's channels (from `tp`'s), one vector a tap."""
    offsets = ", ".join(map(str, lc.toff))
    src.line(f"static const int32_t toff[{len(lc.toff)}] = {{{offsets}}};")
    with src.block(f"for (int64_t k = 0; k < {len(lc.toff)}L; ++k) for (int64_t l = 0; l < {lc.lanes}L; ++l)"):
        src.line(f"wk[k * {lc.lanes}L + l] = tp[{_lane(lc, 'l')} * {lc.channel[3]}L + toff[k]];")


def _write_tap_packer(lc: LaneConv, src: CSource, symbol: str) -> None:
    """`void symbol_pack<taps>(float* dst, const float* in<taps>)`: every task's taps as
    `_gather_taps` lays them out, one task after another (the weight's outer planes all
    share them: `lane_conv` packs only then)."""
    d, taps = lc.channel[0], f"in{lc.taps}"
    with (src.block(f"void {symbol}_pack{lc.taps}(float* restrict dst, const float* restrict {taps})"),
          src.block(f"for (int64_t g = 0; g < {lc.channel_blocks}L; ++g)")):
        _first_channel(lc, "g", src)
        src.line(f"const float* const tp = {taps} + {lc.taps_base}L + i{d} * {lc.channel[3]}L;")
        src.line(f"float* const wk = dst + g * {len(lc.toff) * lc.lanes}L;")
        _gather_taps(lc, src)


def _lane(lc: LaneConv, lane: str) -> str:
    """C expression: the channel (from the task's first) lane `lane` reads: itself, or in a
    partial task the last of the `nv` channels it has, past them."""
    return f"({lane} < nv ? {lane} : nv - 1)" if lc.partial else lane


def _rows(prefix: str, lanes: int) -> list[str]:
    return [f"{prefix}{j}" for j in range(lanes)]


def _copy_in(lc: LaneConv, src: CSource, dst: str) -> None:
    """The task's input planes into the copy, transposed `lanes` positions at a time; the
    plane's last positions past whole blocks one element at a time."""
    lanes, step, plane = lc.lanes, lc.channel[2], lc.in_plane[0] * lc.in_plane[1]
    r = _rows("r", lanes)
    with src.block(f"for (int64_t f = 0; f + {lanes}L <= {plane}L; f += {lanes}L)"):
        src.extend([f"{VECTOR_TYPE} {v} = *(const {VECTOR_TYPE}*)(dp + {_lane(lc, str(j))} * {step}L + f);"
                    for j, v in enumerate(r)])
        src.extend(transpose_lines(r, lanes))
        src.extend([f"*({VECTOR_TYPE}*)(cp + {dst}[f + {j}]) = {v};" for j, v in enumerate(r)])
    if plane % lanes:
        with src.block(f"for (int64_t f = {plane - plane % lanes}L; f < {plane}L; ++f) "
                       f"for (int64_t l = 0; l < {lanes}L; ++l)"):
            src.line(f"cp[{dst}[f] + l] = dp[{_lane(lc, 'l')} * {step}L + f];")


def _compute(c: Compute, lc: LaneConv, src: CSource, base: str, post: Expr | None) -> None:
    """`res`: each output position's vector of the task's channels, GROUP positions at a
    time, then the positions left over as one group."""
    lanes, taps = lc.lanes, len(lc.tap_at)
    names = {a.name: f"i{d}" for d, a in enumerate(c.axes[:-2])}
    counter = new_counter()
    src.line(f"static const int32_t tap[{taps}] = {{{', '.join(str(t * lanes) for t in lc.tap_at)}}};")
    src.line("int64_t p = 0;")
    for group in (GROUP, lc.positions % GROUP):
        if not group or (group == GROUP and lc.positions < GROUP):
            continue
        accs = [f"a{j}" for j in range(group)]
        with src.block(f"for (; p + {group}L <= {lc.positions}L; p += {group}L)"):
            src.line(f"{VECTOR_TYPE} {', '.join(f'{a} = ({VECTOR_TYPE}){{0}}' for a in accs)};")
            src.extend([f"const float* const x{j} = cp + {base}[p + {j}];" for j in range(group)])
            src.line(f"#pragma GCC unroll {min(taps, 64)}")
            with src.block(f"for (int64_t k = 0; k < {taps}L; ++k)"):
                src.line(f"const {VECTOR_TYPE} w = *(const {VECTOR_TYPE}*)(wk + k * {lanes}L);")
                src.extend([f"{a} += w * *(const {VECTOR_TYPE}*)(x{j} + tap[k]);" for j, a in enumerate(accs)])
            for j, a in enumerate(accs):
                value = with_vector_post(c, post, a, names, c.axes[lc.channel[0]].name, lanes, counter, src)
                src.line(f"*({VECTOR_TYPE}*)(res + (p + {j}) * {lanes}L) = {value};")


def _channel_stride(c: Compute, lc: LaneConv) -> int:
    """Output elements between consecutive channels."""
    return math.prod(c.shape[lc.channel[0] + 1:])


def _claim_output(c: Compute, lc: LaneConv, src: CSource, shared: bool) -> None:
    """Declare `ob`, the task's first channel's output plane, and where the output is
    `shared` with other threads (not a chain's scratch) claim the task's output lines
    (compiler/codegen/c/claim.py): its channels' rows of positions, written last."""
    h = len(c.axes) - 2
    src.line(f"float* const ob = out + {flat_offset(c.shape, [f'i{a}' if a < h else '0' for a in range(len(c.axes))])};")
    if shared:
        claim_rows(src, "ob", "nv" if lc.partial else f"{lc.lanes}L", _channel_stride(c, lc), lc.positions)


def _store(c: Compute, lc: LaneConv, src: CSource, post: Expr | None) -> None:
    """The results transposed back into each channel's output plane: whole blocks of
    `lanes` positions as vectors, the last block's positions one at a time; `post`
    applied per element where the vectors do not have it yet."""
    lanes, positions = lc.lanes, lc.positions
    d, ow = lc.channel[0], lc.out_plane[1]
    h, w = len(c.axes) - 2, len(c.axes) - 1
    cstride = _channel_stride(c, lc)
    r = _rows("s", lanes)
    per_element = c.post is not None and post is None
    counter = new_counter()
    names = {a.name: f"i{n}" for n, a in enumerate(c.axes[:h])}
    names[c.axes[h].name] = f"((f + e) / {ow}L)"
    names[c.axes[w].name] = f"((f + e) % {ow}L)"
    ranges = {a.name: (0, a.extent - 1) for a in c.axes}

    def block(full: bool) -> None:
        src.extend([f"{VECTOR_TYPE} {v} = *(const {VECTOR_TYPE}*)(res + (f + {j}) * {lanes}L);"
                    for j, v in enumerate(r)])
        src.extend(transpose_lines(r, lanes))
        for j, v in enumerate(r):
            guard = f"if ({j}L < nv) " if lc.partial and j else ""  # lane 0 is always the task's
            if full and not per_element:
                src.line(f"{guard}*({VECTOR_TYPE}*)(ob + {j * cstride}L + f) = {v};")
                continue
            end = f"{lanes}L" if full else f"{positions}L - f"
            with src.block(f"{guard}for (int64_t e = 0; e < {end}; ++e)"):
                value = f"{v}[e]"
                if per_element:
                    writer = ExprWriter(c.inputs, {**names, c.axes[d].name: f"(i{d} + {j}L)", ACC: value},
                                        counter, ranges)
                    value = writer.emit(c.post)
                    src.extend(writer.lines)
                src.line(f"ob[{j * cstride}L + f + e] = {value};")

    with src.block(f"for (int64_t f = 0; f + {lanes}L <= {positions}L; f += {lanes}L)"):
        block(True)
    if positions % lanes:
        with src.block(""):
            src.line(f"const int64_t f = {positions - positions % lanes}L;")
            block(False)
