"""CPU kernel of a fused attention group (compiler/ir/attention.py): flash-style, the
scores never leave the task's scratch.

A task takes `bq` query rows of one batch index (batch and heads flattened; the plan's
`TileConfig.attention` gives `bq`, the key block `bk` and the register rows) and copies
them transposed into scratch `qt[r][i]` once, so that everything per key runs on vectors
along the query rows. It walks the keys in blocks:
  1. the block's scores `st[j][i]`: for a few keys at a time (the register rows), vectors
     of query rows accumulated over the head axis in order, each key's element broadcast
     from its row of K, read in place (each score a sequential sum: the same bits at any
     lane count);
  2. the group's score expression (scale, mask) on them, as vectors where it has a vector
     form along the queries (c/vector.py), else as scalars;
  3. the online softmax, vertically: each row's running max grows to the block's, the old
     sum and accumulator are scaled by exp(old - new), the block's exponentials (the
     portable vector exp of c/vector_math.py) summed key by key;
  4. the exponentials times the value rows into the output rows' accumulators, a few
     rows at a time, each loaded vector of values serving every one of them; a few dozen
     keys at a time for all the rows, so that those value rows are read from L1, not L2,
     by every group of rows.
With a causal mask (compiler/ir/attention.py's `Causal`) a task walks only the keys up to
its last row's diagonal, and masks only the blocks that cross its first row's: Llama's
attention does half the work (the masked keys' exponentials, 0 in float32, are checked
to be so before they are skipped).
The output row is the accumulator divided by the sum. A row whose scores are all -inf
keeps a zero sum and comes out NaN, as the unfused softmax gives it, or 0 where the group
makes NaN probabilities 0 (torch's SDPA decomposition; the values assumed finite).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
from compiler.codegen.cexpr import ExprWriter, flat_offset, literal, new_counter
from compiler.codegen.csource import CSource
from compiler.ir.attention import Attention, Causal, batch_names, row_stride
from compiler.ir.contraction import expr_vars
from compiler.ir.te import ACC, Compute, Const, Expr, Load, Var, call, substitute
from compiler.schedule.plan import ATTENTION_VECTORS_PER_PASS


def render_attention(c: Compute, a: Attention, blocks: tuple[int, ...], lanes: int, src: CSource,
                     symbol: str, params: list[str], header: str, parallel: bool) -> None:
    """Write `symbol`'s task function and team function `header` for attention group `c`
    (parts `a`) in blocks `blocks` = (query rows, keys, register rows of the products, keys
    per pass of the values' product), on `lanes`-wide float32 vectors."""
    bq, bk, rows, sub = blocks
    src.define({**exp_definitions(lanes, portable=True), **max_definitions(lanes)})
    names = [p.rsplit(" ", 1)[1] for p in params]
    qblocks = -(-a.queries // bq)
    tasks = math.prod(a.batch) * qblocks
    with src.block(f"static void {symbol}_task({', '.join(params)}, const int64_t t)"):
        src.extend(vector_typedefs("float32", lanes))
        _bases(c, a, qblocks, bq, src)
        _Body(c, a, (bq, bk, rows, sub), lanes, src).write()
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

    def __init__(self, c: Compute, a: Attention, blocks: tuple[int, int, int, int], lanes: int,
                 src: CSource) -> None:
        self.c, self.a, self.lanes, self.src = c, a, lanes, src
        bq, self.bk, self.rows, self.sub = blocks
        self.bq = -(-bq // lanes) * lanes  # query rows in scratch: whole vectors
        self.exp = exp_function(lanes, nonpositive=True, portable=True)
        self.max = max_function(lanes)
        shapes = [t.shape for t in c.inputs]
        # elements between consecutive query rows, key rows (or, transposed, head rows), value rows
        self.q_row = row_stride(a.q, shapes[a.q.input], "i")
        self.k_row = row_stride(a.k, shapes[a.k.input], "r" if a.k_transposed else "j")
        self.v_row = row_stride(a.v, shapes[a.v.input], "j")

    def write(self) -> None:
        a, bq, src = self.a, self.bq, self.src
        src.line(f"float qt[{a.head_dim}][{bq}] __attribute__((aligned(64)));")
        src.line(f"float st[{self.bk}][{bq}] __attribute__((aligned(64)));")
        src.line(f"float acc[{bq}][{a.value_dim}] __attribute__((aligned(64)));")
        src.line(f"float top[{bq}] __attribute__((aligned(64))), sum[{bq}] __attribute__((aligned(64)));")
        with src.block(f"for (int64_t r = 0; r < {a.head_dim}L; ++r)"):
            src.line(f"for (int64_t ii = 0; ii < rows; ++ii) qt[r][ii] = qp[(i0 + ii) * {self.q_row}L + r];")
            src.line(f"for (int64_t ii = rows; ii < {bq}L; ++ii) qt[r][ii] = 0.0f;")
        with src.block(f"for (int64_t ii = 0; ii < {bq}L; ++ii)"):
            src.line("top[ii] = -INFINITY;")
            src.line("sum[ii] = 0.0f;")
            src.line(f"for (int64_t d = 0; d < {a.value_dim}L; ++d) acc[ii][d] = 0.0f;")
        if a.causal is None:
            with src.block(f"for (int64_t kb = 0; kb < {a.keys}L; kb += {self.bk}L)"):
                src.line(f"const int64_t n = {a.keys}L - kb < {self.bk}L ? {a.keys}L - kb : {self.bk}L;")
                self._key_block()
        else:
            self._causal_blocks(a.causal)
        with src.block("for (int64_t ii = 0; ii < rows; ++ii)"):
            src.line("const float inv = 1.0f / sum[ii];")
            stride = math.prod(self.c.shape[a.out_axes.index("i") + 1:])
            src.line(f"float* restrict orow = op + (i0 + ii) * {stride}L;")
            # all its scores -inf (sum 0) or one NaN: the row's probabilities are NaN
            value = "!(sum[ii] > 0.0f) ? 0.0f : acc[ii][d] * inv" if a.nan_to_zero else "acc[ii][d] * inv"
            src.line(f"for (int64_t d = 0; d < {a.value_dim}L; ++d) orow[d] = {value};")

    def _key_block(self) -> None:
        """Keys kb .. kb + n - 1: their scores, the online softmax, their values. A causal
        mask is applied only to the keys past the first row's diagonal."""
        a, src = self.a, self.src
        self._scores()
        if a.causal is None:
            self._score_expression(a.score, "0", "n")
        else:
            src.line(f"int64_t seen = i0 + {a.causal.offset}L + 1 - kb;  // keys every row sees")
            src.line("seen = seen < 0 ? 0 : seen > n ? n : seen;")
            self._score_expression(a.causal.unmasked, "0", "seen")
            self._score_expression(a.score, "seen", "n")
        with src.block(f"for (int64_t ii = 0; ii < {self.bq}L; ii += {self.lanes}L)"):
            self._online_softmax()
        self._values()

    def _causal_blocks(self, causal: Causal) -> None:
        """The key blocks up to the last key any of the task's rows sees (past it every key
        is masked); the rest too only where some row's max is not far enough above the
        masked scores for each of their exponentials to come out 0 (exp(x) is 0 in float32
        for x < -103.98), as it does for the finite scores a real mask hides."""
        a, src, off = self.a, self.src, causal.offset
        src.line(f"int64_t hi = i0 + rows + {off}L;")
        src.line(f"hi = hi < 0 ? 0 : hi > {a.keys}L ? {a.keys}L : hi;")
        with src.block(f"for (int64_t kb = 0, n = 0; kb < {a.keys}L; kb += n)"):
            with src.block("if (kb >= hi)"):
                src.line("int64_t ii = 0;")
                src.line(f"while (ii < rows && top[ii] - {literal(causal.bound, 'float32')} > 104.0f) ++ii;")
                src.line("if (ii == rows) break;")
                src.line(f"hi = {a.keys}L;")
            src.line(f"n = hi - kb < {self.bk}L ? hi - kb : {self.bk}L;")
            self._key_block()

    def _key(self, j: str) -> str:
        """The C address of key `j`'s element r."""
        if self.a.k_transposed:
            return f"kp[r * {self.k_row}L + {j}]"
        return f"kp[({j}) * {self.k_row}L + r]"

    def _scores(self) -> None:
        """st[j][..] = K row j . qt for the block's keys, `self.rows` keys and `ATTENTION_VECTORS_PER_PASS`
        vectors of query rows per pass (a key past the last is the last again)."""
        a, lanes, src, keys = self.a, self.lanes, self.src, range(self.rows)
        chunk = next(w for w in range(ATTENTION_VECTORS_PER_PASS, 0, -1) if self.bq // lanes % w == 0)
        with src.block(f"for (int64_t jj = 0; jj < n; jj += {self.rows})"):
            src.extend([f"const int64_t key{k} = jj + {k} < n ? jj + {k} : n - 1;" for k in keys])
            with src.block(f"for (int64_t ii = 0; ii < {self.bq}L; ii += {chunk * lanes}L)"):
                src.line(f"{VECTOR_TYPE} {', '.join(f'x{k}[{chunk}]' for k in keys)};")
                zero = splat("0.0f", lanes)
                src.line(f"for (int u = 0; u < {chunk}; ++u) {{ {' '.join(f'x{k}[u] = {zero};' for k in keys)} }}")
                with src.block(f"for (int64_t r = 0; r < {a.head_dim}L; ++r)"):
                    weights = [f"w{k} = {self._key(f'kb + key{k}')}" for k in keys]
                    src.line(f"const float {', '.join(weights)};")
                    with src.block(f"for (int u = 0; u < {chunk}; ++u)"):
                        src.line(f"const {VECTOR_TYPE} qv = *(const {VECTOR_TYPE}*)(&qt[r][ii + u * {lanes}L]);")
                        src.extend([f"x{k}[u] = x{k}[u] + w{k} * qv;" for k in keys])
                with src.block(f"for (int u = 0; u < {chunk}; ++u)"):
                    src.extend([f"*({VECTOR_TYPE}*)(&st[key{k}][ii + u * {lanes}L]) = x{k}[u];" for k in keys])

    def _score_expression(self, expr: Expr, start: str, stop: str) -> None:
        """Score expression `expr` on the block's scores of keys `start` .. `stop` - 1 (past
        the last query row too: those rows are never stored, and their index is clamped
        for the expression)."""
        a, lanes, src, bq = self.a, self.lanes, self.src, self.bq
        if expr == Var(ACC, "float32"):
            return
        names = {b: b for b in batch_names(len(a.batch))} | {"j": "(kb + jj)"}
        with src.block(f"for (int64_t jj = {start}; jj < {stop}; ++jj)"):
            src.line("int64_t ii = 0;")
            score, gathered = self._gathered(expr)
            if vectorizes(score, "i", self.c.inputs, "float32", {ACC, *gathered.values()}):
                with src.block(f"for (; ii + {lanes}L <= rows; ii += {lanes}L)"):
                    src.line(f"const {VECTOR_TYPE} sv = *({VECTOR_TYPE}*)(&st[jj][ii]);")
                    counter = new_counter()
                    for ld, name in gathered.items():
                        values = []
                        for lane in range(lanes):  # a writer per lane: each memoises its own values
                            w = ExprWriter(self.c.inputs, names | {"i": f"(i0 + ii + {lane})"}, counter)
                            values.append(w.emit(ld))
                            src.extend(w.lines)
                        src.line(f"const {VECTOR_TYPE} {name} = {{{', '.join(values)}}};")
                    vectors = {ACC: "sv"} | {x: x for x in gathered.values()}
                    vw = VectorWriter(self.c.inputs, names | {"i": "(i0 + ii)"} | vectors, counter, "i", lanes,
                                      set(vectors))
                    value = vw.emit_vector(score)
                    src.define(vw.definitions)
                    src.extend(vw.lines)
                    src.line(f"*({VECTOR_TYPE}*)(&st[jj][ii]) = {value};")
            with src.block(f"for (; ii < {bq}L; ++ii)"):
                src.line("const int64_t at = ii < rows ? ii : rows - 1;")
                w = ExprWriter(self.c.inputs, names | {"i": "(i0 + at)", ACC: "st[jj][ii]"}, new_counter())
                value = w.emit(expr)
                src.extend(w.lines)
                src.line(f"st[jj][ii] = {value};")

    def _gathered(self, score: Expr) -> tuple[Expr, dict[Load, str]]:
        """`score` with each float or boolean load that walks the query rows at a stride (a
        [queries, keys] mask) read as a vector variable instead (a boolean one as a float
        vector compared with 0: a vector select's mask), and those loads by name: gathered
        lane by lane, so that the rest of the expression still runs on vectors."""
        gathered: dict[Load, str] = {}

        def fn(x: Expr) -> Expr | None:
            if not (isinstance(x, Load) and x.dtype in {"float32", "bool"} and "i" in expr_vars(x)):
                return None
            if x.dtype == "float32" and vectorizes(x, "i", self.c.inputs, "float32"):
                return None
            value = Var(gathered.setdefault(x, f"g{len(gathered)}"), "float32")
            return value if x.dtype == "float32" else call("ne", value, Const(0.0, "float32"))

        return substitute(score, fn), gathered

    def _online_softmax(self) -> None:
        """Query rows ii.. (one vector): the running max and sum moved to this block, the
        block's exponentials in st, the accumulators rescaled."""
        lanes, src, v, m = self.lanes, self.src, VECTOR_TYPE, MASK_TYPE
        src.line(f"const {v} old = *({v}*)(&top[ii]);")
        src.line(f"{v} mx = old;")
        src.line(f"for (int64_t jj = 0; jj < n; ++jj) mx = {self.max}(*({v}*)(&st[jj][ii]), mx);")
        # a row all -inf so far counts no exponential (exp(-inf - -inf) would be NaN)
        src.line(f"const {m} none = mx == {splat('-INFINITY', lanes)};")
        src.line(f"const {v} base = ({v})(~none & ({m})mx);")
        src.line(f"const {v} alpha = ({v})(~(old == {splat('-INFINITY', lanes)}) & ({m}){self.exp}(old - base));")
        src.line(f"*({v}*)(&top[ii]) = mx;")
        src.line(f"{v} total = *({v}*)(&sum[ii]) * alpha;")
        with src.block("for (int64_t jj = 0; jj < n; ++jj)"):
            src.line(f"const {v} e = ({v})(~none & ({m}){self.exp}(*({v}*)(&st[jj][ii]) - base));")
            src.line(f"*({v}*)(&st[jj][ii]) = e;")
            src.line("total = total + e;")
        src.line(f"*({v}*)(&sum[ii]) = total;")
        with src.block(f"for (int k = 0; k < {lanes}; ++k)"):
            src.line(f"if (alpha[k] != 1.0f) for (int64_t d = 0; d < {self.a.value_dim}L; ++d) acc[ii + k][d] *= alpha[k];")

    def _values(self) -> None:
        """acc[i] += st[j][i] * V[kb + j] for the block's keys, `self.rows` rows at a time,
        `self.sub` keys at a time for all rows (those value rows stay in L1 meanwhile)."""
        a, lanes, src = self.a, self.lanes, self.src
        dv = a.value_dim
        full = dv // lanes * lanes
        with src.block(f"for (int64_t j0 = 0; j0 < n; j0 += {self.sub}L)"):
            src.line(f"const int64_t j1 = n - j0 < {self.sub}L ? n : j0 + {self.sub}L;")
            with src.block(f"for (int64_t ii = 0; ii < rows; ii += {self.rows})"):
                src.extend([f"const int64_t row{k} = ii + {k} < rows ? ii + {k} : rows - 1;" for k in range(self.rows)])
                for start, width in _chunks(full // lanes, ATTENTION_VECTORS_PER_PASS):
                    self._value_chunk(start * lanes, width)
        if full < dv:
            with src.block("for (int64_t ii = 0; ii < rows; ++ii)"), src.block("for (int64_t jj = 0; jj < n; ++jj)"):
                src.line(f"const float* restrict vr = vp + (kb + jj) * {self.v_row}L;")
                src.line(f"for (int64_t d = {full}L; d < {dv}L; ++d) acc[ii][d] += st[jj][ii] * vr[d];")

    def _value_chunk(self, d0: int, width: int) -> None:
        """`width` vectors of the rows' accumulators from column d0, kept in registers across
        the block's keys (a row repeated past the last computes and stores the same values)."""
        lanes, src, rows = self.lanes, self.src, range(self.rows)
        at = [f"*({VECTOR_TYPE}*)(&acc[row{k}][{d0} + u * {lanes}])" for k in rows]
        with src.block(""):
            src.line(f"{VECTOR_TYPE} {', '.join(f'y{k}[{width}]' for k in rows)};")
            src.line(f"for (int u = 0; u < {width}; ++u) {{ {' '.join(f'y{k}[u] = {at[k]};' for k in rows)} }}")
            with src.block("for (int64_t jj = j0; jj < j1; ++jj)"):
                src.line(f"const float* restrict vr = vp + (kb + jj) * {self.v_row}L + {d0}L;")
                src.line(f"const float {', '.join(f'p{k} = st[jj][row{k}]' for k in rows)};")
                with src.block(f"for (int u = 0; u < {width}; ++u)"):
                    src.line(f"const {VECTOR_TYPE} w = *(const {VECTOR_TYPE}*)(vr + u * {lanes});")
                    src.extend([f"y{k}[u] = y{k}[u] + p{k} * w;" for k in rows])
            src.line(f"for (int u = 0; u < {width}; ++u) {{ {' '.join(f'{at[k]} = y{k}[u];' for k in rows)} }}")


def _chunks(n: int, size: int) -> Sequence[tuple[int, int]]:
    """(start, width) pieces of `n` vectors, at most `size` wide."""
    return [(s, min(size, n - s)) for s in range(0, n, size)]
