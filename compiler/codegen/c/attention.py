"""CPU kernel of a fused attention group (compiler/ir/attention.py): flash-style, the
scores never leave the task's scratch.

A task takes `bq` query rows of one batch index (batch and heads flattened; the plan's
`TileConfig.attention` gives `bq` and the key block `bk`) and walks the keys in blocks:
  1. the key block is copied transposed into scratch `kt[r][j]`, so that the scores of
     a query row are whole vectors along the keys, accumulated over the head axis in
     order (each score a sequential sum: the same bits at any lane count);
  2. the group's score expression (scale, mask) runs on them as vectors where it has a
     vector form (c/vector.py), else as scalars;
  3. the online softmax: the row's running max grows to the block's, the old sum and
     accumulator are scaled by exp(old - new), the block's exponentials (the portable
     vector exp of c/vector_math.py) are summed in fixed 8-wide chunks and
  4. accumulated with the value rows into the output row's accumulators.
Both products run several query rows at once (the plan's register rows), each loaded
vector of keys or values serving every one of them.
The output row is the accumulator divided by the sum. A row whose scores are all -inf
keeps a zero sum and comes out NaN, as the unfused softmax gives it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from compiler.codegen.c.team import mark_used, shared_tasks
from compiler.codegen.c.vector import (
    MASK_TYPE,
    VECTOR_TYPE,
    VectorWriter,
    splat,
    vector_typedefs,
    vectorizes,
)
from compiler.codegen.c.vector_math import (
    exp_definitions,
    exp_function,
    max_definitions,
    max_function,
)
from compiler.codegen.cexpr import ExprWriter, flat_offset, new_counter
from compiler.codegen.csource import CSource
from compiler.ir.attention import Attention, batch_names, row_stride
from compiler.ir.te import ACC, Compute, Var

_CHUNK = 4  # vectors of scores / values per row in flight (times the register rows: the chains)
_SUM = 8  # lanes of the fixed-width sum of the exponentials


def render_attention(c: Compute, a: Attention, blocks: tuple[int, ...], lanes: int, src: CSource,
                     symbol: str, params: list[str], header: str, parallel: bool) -> None:
    """Write `symbol`'s task function and team function `header` for attention group `c`
    (parts `a`) in blocks `blocks` = (query rows, keys, register rows of the products), on
    `lanes`-wide float32 vectors."""
    bq, bk, rows = blocks
    src.define({**exp_definitions(lanes, portable=True), **max_definitions(lanes)})
    src.line(f"typedef float tf_sum8 __attribute__((vector_size({_SUM * 4}), aligned(4), may_alias));")
    names = [p.rsplit(" ", 1)[1] for p in params]
    qblocks = -(-a.queries // bq)
    tasks = math.prod(a.batch) * qblocks
    with src.block(f"static void {symbol}_task({', '.join(params)}, const int64_t t)"):
        src.extend(vector_typedefs("float32", lanes))
        _bases(c, a, qblocks, bq, src)
        _Body(c, a, (bq, bk, rows), lanes, src).write()
    with src.block(header):
        mark_used(src, params)
        with shared_tasks(src, parallel and tasks > 1), src.block(f"for (int64_t t = 0; t < {tasks}L; ++t)"):
            src.line(f"{symbol}_task({', '.join(names)}, t);")


def _bases(c: Compute, a: Attention, qblocks: int, bq: int, src: CSource) -> None:
    """The task's batch indices, query rows, and the bases of its Q, K, V and output rows."""
    src.line(f"const int64_t i0 = (t % {qblocks}L) * {bq}L;")
    src.line(f"const int64_t rows = {a.queries}L - i0 < {bq}L ? {a.queries}L - i0 : {bq}L;")
    src.line(f"const int64_t flat = t / {qblocks}L;")
    batch = batch_names(len(a.batch))
    stride = 1
    for name, extent in reversed(list(zip(batch, a.batch, strict=True))):
        src.line(f"const int64_t {name} = flat / {stride}L % {extent}L;")
        stride *= extent
    # each operand's base: its row and column axes at 0
    writer = ExprWriter(c.inputs, {b: b for b in batch} | {x: "0" for x in "ijrd"}, new_counter())
    offsets = {}
    for role, ld in (("q", a.q), ("k", a.k), ("v", a.v)):
        offsets[role] = flat_offset(c.inputs[ld.input].shape, [writer.emit(x) for x in ld.indices])
    src.extend(writer.lines)
    for role, ld in (("q", a.q), ("k", a.k), ("v", a.v)):
        src.line(f"const float* restrict {role}p = in{ld.input} + {offsets[role]};")
    out = flat_offset(c.shape, [x if x in batch else "0" for x in a.out_axes])
    src.line(f"float* restrict op = out + {out};")
    src.extend([f"(void){b};" for b in batch])


class _Body:
    """The key-block loop of one task."""

    def __init__(self, c: Compute, a: Attention, blocks: tuple[int, int, int], lanes: int, src: CSource) -> None:
        self.c, self.a, self.lanes, self.src = c, a, lanes, src
        self.bq, self.bk, self.rows = blocks
        self.exp = exp_function(lanes, nonpositive=True, portable=True)
        self.max = max_function(lanes)
        shapes = [t.shape for t in c.inputs]
        # elements between consecutive query rows, key rows (or, transposed, head rows), value rows
        self.q_row = row_stride(a.q, shapes[a.q.input], "i")
        self.k_row = row_stride(a.k, shapes[a.k.input], "r" if a.k_transposed else "j")
        self.v_row = row_stride(a.v, shapes[a.v.input], "j")

    def write(self) -> None:
        a, bq, bk, src = self.a, self.bq, self.bk, self.src
        src.line(f"float kt[{a.head_dim}][{bk}] __attribute__((aligned(64)));")
        src.line(f"float s[{bq}][{bk}] __attribute__((aligned(64)));")
        src.line(f"float acc[{bq}][{a.value_dim}] __attribute__((aligned(64)));")
        src.line(f"float top[{bq}], sum[{bq}];")
        with src.block("for (int64_t ii = 0; ii < rows; ++ii)"):
            src.line("top[ii] = -INFINITY;")
            src.line("sum[ii] = 0.0f;")
            src.line(f"for (int64_t d = 0; d < {a.value_dim}L; ++d) acc[ii][d] = 0.0f;")
        with src.block(f"for (int64_t kb = 0; kb < {a.keys}L; kb += {bk}L)"):
            src.line(f"const int64_t n = {a.keys}L - kb < {bk}L ? {a.keys}L - kb : {bk}L;")
            self._pack_keys()
            self._scores()
            with src.block("for (int64_t ii = 0; ii < rows; ++ii)"):
                self._score_row()
                self._online_softmax()
            self._values()
        with src.block("for (int64_t ii = 0; ii < rows; ++ii)"):
            src.line("const float inv = 1.0f / sum[ii];")
            src.line(f"float* restrict orow = op + (i0 + ii) * {math.prod(self.c.shape[a.out_axes.index('i') + 1:])}L;")
            src.line(f"for (int64_t d = 0; d < {a.value_dim}L; ++d) orow[d] = acc[ii][d] * inv;")

    def _pack_keys(self) -> None:
        """kt[r][jj] = K[kb + jj][r], zero past the last key."""
        a, src = self.a, self.src
        with src.block(f"for (int64_t r = 0; r < {a.head_dim}L; ++r)"):
            at = f"kp[r * {self.k_row}L + kb + jj]" if a.k_transposed else f"kp[(kb + jj) * {self.k_row}L + r]"
            src.line(f"for (int64_t jj = 0; jj < n; ++jj) kt[r][jj] = {at};")
            src.line(f"for (int64_t jj = n; jj < {self.bk}L; ++jj) kt[r][jj] = 0.0f;")

    def _row_group(self) -> list[str]:
        """Inside a loop over ii in steps of `self.rows`: `row{k}`, the k-th row of the step
        (the last row again past the task's last, computing the same values twice)."""
        return [f"const int64_t row{k} = ii + {k} < rows ? ii + {k} : rows - 1;" for k in range(self.rows)]

    def _scores(self) -> None:
        """s[ii][..] = Q row . kt, `self.rows` rows at a time, `_CHUNK` vectors of keys per pass."""
        a, lanes, src, rows = self.a, self.lanes, self.src, range(self.rows)
        chunk = next(w for w in range(_CHUNK, 0, -1) if self.bk // lanes % w == 0)
        with src.block(f"for (int64_t ii = 0; ii < rows; ii += {self.rows})"):
            src.extend(self._row_group())
            src.extend([f"const float* restrict q{k} = qp + (i0 + row{k}) * {self.q_row}L;" for k in rows])
            with src.block(f"for (int64_t jj = 0; jj < {self.bk}L; jj += {chunk * lanes}L)"):
                src.line(f"{VECTOR_TYPE} {', '.join(f'x{k}[{chunk}]' for k in rows)};")
                zero = splat("0.0f", lanes)
                src.line(f"for (int u = 0; u < {chunk}; ++u) {{ {' '.join(f'x{k}[u] = {zero};' for k in rows)} }}")
                with src.block(f"for (int64_t r = 0; r < {a.head_dim}L; ++r)"):
                    src.line(f"const float {', '.join(f'a{k} = q{k}[r]' for k in rows)};")
                    with src.block(f"for (int u = 0; u < {chunk}; ++u)"):
                        src.line(f"const {VECTOR_TYPE} w = *(const {VECTOR_TYPE}*)(&kt[r][jj + u * {lanes}L]);")
                        src.extend([f"x{k}[u] = x{k}[u] + a{k} * w;" for k in rows])
                with src.block(f"for (int u = 0; u < {chunk}; ++u)"):
                    src.extend([f"*({VECTOR_TYPE}*)(&s[row{k}][jj + u * {lanes}L]) = x{k}[u];" for k in rows])

    def _score_row(self) -> None:
        """The group's score expression on row ii's keys in the block (not past the last)."""
        a, lanes, src = self.a, self.lanes, self.src
        if a.score == Var(ACC, "float32"):
            return
        names = {b: b for b in batch_names(len(a.batch))} | {"i": "(i0 + ii)"}
        src.line("int64_t jj = 0;")
        if vectorizes(a.score, "j", self.c.inputs, "float32", {ACC}):
            with src.block(f"for (; jj + {lanes}L <= n; jj += {lanes}L)"):
                src.line(f"const {VECTOR_TYPE} sv = *({VECTOR_TYPE}*)(&s[ii][jj]);")
                vw = VectorWriter(self.c.inputs, names | {"j": "(kb + jj)", ACC: "sv"}, new_counter(), "j",
                                  lanes, {ACC})
                value = vw.emit_vector(a.score)
                src.define(vw.definitions)
                src.extend(vw.lines)
                src.line(f"*({VECTOR_TYPE}*)(&s[ii][jj]) = {value};")
        with src.block("for (; jj < n; ++jj)"):
            w = ExprWriter(self.c.inputs, names | {"j": "(kb + jj)", ACC: "s[ii][jj]"}, new_counter())
            value = w.emit(a.score)
            src.extend(w.lines)
            src.line(f"s[ii][jj] = {value};")

    def _online_softmax(self) -> None:
        """Row ii: the running max and sum moved to this block, its exponentials in s."""
        bk, lanes, src = self.bk, self.lanes, self.src
        src.line("float* restrict sr = s[ii];")
        # past the last key: no score (-inf), so that the row's max runs on whole vectors
        src.line(f"for (int64_t jj = n; jj < {bk}L; ++jj) sr[jj] = -INFINITY;")
        src.line(f"{VECTOR_TYPE} mv = {splat('top[ii]', lanes)};")
        src.line(f"for (int64_t jj = 0; jj < {bk}L; jj += {lanes}L) mv = {self.max}(*({VECTOR_TYPE}*)(&sr[jj]), mv);")
        src.extend(_lane_tree("mv", lanes, lambda a, b: f"{self.max}({a}, {b})"))
        src.line("const float mx = mv[0];")
        # all -inf so far: no exponential counts (exp(-inf - -inf) would be NaN)
        src.line("const float base = mx == -INFINITY ? 0.0f : mx;")
        src.line(f"const float alpha = top[ii] == -INFINITY ? 0.0f : {self.exp}({splat('top[ii] - base', lanes)})[0];")
        src.line("top[ii] = mx;")
        with src.block(f"for (int64_t jj = 0; jj < {bk}L; jj += {lanes}L)"):
            src.line(f"*({VECTOR_TYPE}*)(&sr[jj]) = {self.exp}(*({VECTOR_TYPE}*)(&sr[jj]) - base);")
        src.line(f"for (int64_t jj = n; jj < {bk}L; ++jj) sr[jj] = 0.0f;")
        src.line("if (mx == -INFINITY) for (int64_t jj = 0; jj < n; ++jj) sr[jj] = 0.0f;")
        src.line(f"tf_sum8 part = {{{', '.join(['0.0f'] * _SUM)}}};")
        src.line(f"for (int64_t jj = 0; jj < {bk}L; jj += {_SUM}L) part = part + *(const tf_sum8*)(&sr[jj]);")
        src.line(f"sum[ii] = sum[ii] * alpha + {_pairwise([f'part[{k}]' for k in range(_SUM)])};")
        src.line(f"if (alpha != 1.0f) for (int64_t d = 0; d < {self.a.value_dim}L; ++d) acc[ii][d] *= alpha;")

    def _values(self) -> None:
        """acc[ii] += s[ii][jj] * V[kb + jj] for the block's keys, `self.rows` rows at a time."""
        a, lanes, src = self.a, self.lanes, self.src
        dv = a.value_dim
        full = dv // lanes * lanes
        with src.block(f"for (int64_t ii = 0; ii < rows; ii += {self.rows})"):
            src.extend(self._row_group())
            for start, width in _chunks(full // lanes, _CHUNK):
                self._value_chunk(start * lanes, width)
        if full < dv:
            with src.block("for (int64_t ii = 0; ii < rows; ++ii)"), src.block("for (int64_t jj = 0; jj < n; ++jj)"):
                src.line(f"const float* restrict vr = vp + (kb + jj) * {self.v_row}L;")
                src.line(f"for (int64_t d = {full}L; d < {dv}L; ++d) acc[ii][d] += s[ii][jj] * vr[d];")

    def _value_chunk(self, d0: int, width: int) -> None:
        """`width` vectors of the rows' accumulators from column d0, kept in registers across
        the block's keys (a row repeated past the last computes and stores the same values)."""
        lanes, src, rows = self.lanes, self.src, range(self.rows)
        at = [f"*({VECTOR_TYPE}*)(&acc[row{k}][{d0} + u * {lanes}])" for k in rows]
        with src.block(""):
            src.line(f"{VECTOR_TYPE} {', '.join(f'y{k}[{width}]' for k in rows)};")
            src.line(f"for (int u = 0; u < {width}; ++u) {{ {' '.join(f'y{k}[u] = {at[k]};' for k in rows)} }}")
            with src.block("for (int64_t jj = 0; jj < n; ++jj)"):
                src.line(f"const float* restrict vr = vp + (kb + jj) * {self.v_row}L + {d0}L;")
                src.line(f"const float {', '.join(f'p{k} = s[row{k}][jj]' for k in rows)};")
                with src.block(f"for (int u = 0; u < {width}; ++u)"):
                    src.line(f"const {VECTOR_TYPE} w = *(const {VECTOR_TYPE}*)(vr + u * {lanes});")
                    src.extend([f"y{k}[u] = y{k}[u] + p{k} * w;" for k in rows])
            src.line(f"for (int u = 0; u < {width}; ++u) {{ {' '.join(f'{at[k]} = y{k}[u];' for k in rows)} }}")


def _chunks(n: int, size: int) -> Sequence[tuple[int, int]]:
    """(start, width) pieces of `n` vectors, at most `size` wide."""
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def _lane_tree(v: str, lanes: int, combine: Callable[[str, str], str]) -> list[str]:
    """Lines folding vector `v` in halves until its lane 0 holds `combine` over every lane
    (log2(lanes) steps instead of a chain through every lane)."""
    lines, half = [], lanes // 2
    while half:
        mask = ", ".join(str((k + half) % lanes) for k in range(lanes))
        lines.append(f"{v} = {combine(v, f'__builtin_shuffle({v}, ({MASK_TYPE}){{{mask}}})')};")
        half //= 2
    return lines


def _pairwise(terms: list[str]) -> str:
    """The sum of `terms` as a balanced tree (a fixed order, so the same bits everywhere)."""
    if len(terms) == 1:
        return terms[0]
    mid = len(terms) // 2
    return f"({_pairwise(terms[:mid])} + {_pairwise(terms[mid:])})"
