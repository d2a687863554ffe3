"""The CUDA kernel of a fused attention group (compiler/ir/attention.py): flash attention,
Welder's shared-memory connection between the two contractions on the GPU.

A thread block takes `bq` query rows of one batch index (batch and heads flattened, the
blocks walked grid-stride; `AttentionGeometry` in the plan gives the sizes). Its threads
form teams of `team` lanes, one team per query row at a time, `rows` rows per thread.
The queries are staged in shared memory once; then, for each block of `bk` keys:
  1. the key block is staged in shared memory (transposed K read along the keys, so the
     global reads stay coalesced); each thread computes its rows' scores against every
     `team`-th key of the block, summed over the head axis in order;
  2. the group's score expression (scale, mask) on each score; keys past the last are
     -inf;
  3. the online softmax in registers: each row's block max and sum are xor shuffles
     within its team, the running max grows to it, the running sum and the output
     accumulators are scaled by exp(old - new); the block's exponentials go to shared
     memory;
  4. the value block is staged in the key block's space and each thread adds the
     probabilities times the values into its rows' every `team`-th output column.
The output is the accumulator divided by the sum. A row whose scores are all -inf keeps a
zero sum and comes out NaN, as the unfused softmax gives it, or 0 where the group makes
NaN probabilities 0. Every thread reaches every barrier and shuffle.
"""

from __future__ import annotations

import math

from compiler.codegen import cexpr
from compiler.codegen.cuda.expr import CudaExprWriter, emit
from compiler.codegen.cuda.parts import signature
from compiler.ir.attention import Attention, batch_names, row_stride
from compiler.ir.te import ACC, Compute, Var
from compiler.schedule.cuda_launch import AttentionGeometry, ceil_div


def render_attention(c: Compute, a: Attention, g: AttentionGeometry, symbol: str) -> str:
    """CUDA source of the fused attention kernel for group `c` (parts `a`) in blocks `g`."""
    return "\n".join(_Kernel(c, a, g).lines(symbol)) + "\n"


class _Kernel:
    """The lines of one attention kernel."""

    def __init__(self, c: Compute, a: Attention, g: AttentionGeometry) -> None:
        self.c, self.a, self.g = c, a, g
        self.ty = g.bq // g.rows  # team rows of the block
        self.scores = g.bk // g.team  # keys per thread and row
        self.columns = ceil_div(a.value_dim, g.team)  # output columns per thread and row
        self.counter = cexpr.new_counter()
        shapes = [t.shape for t in c.inputs]
        # elements between consecutive query rows, key rows (transposed: head rows), value rows
        self.q_row = row_stride(a.q, shapes[a.q.input], "i")
        self.k_row = row_stride(a.k, shapes[a.k.input], "r" if a.k_transposed else "j")
        self.v_row = row_stride(a.v, shapes[a.v.input], "j")

    def lines(self, symbol: str) -> list[str]:
        a, g = self.a, self.g
        qblocks = ceil_div(a.queries, g.bq)
        out = [signature(self.c, symbol, g.threads) + " {"]
        out += [f"  __shared__ float {name}[{r}][{cols}];"
                for name, (r, cols) in g.smem(a.head_dim, a.value_dim).items()]
        out += [f"  const int lane = threadIdx.x % {g.team};",
                f"  const int trow = threadIdx.x / {g.team};",
                f"  for (long long task = blockIdx.x; task < {math.prod(a.batch) * qblocks}LL; task += gridDim.x) {{"]
        body = self._bases(qblocks)
        body += self._stage("sq", g.bq, a.head_dim, "i0", a.queries, "qp", self.q_row, False)
        body += self._init()
        body.append(f"for (long long kb = 0; kb < {a.keys}LL; kb += {g.bk}) {{")
        # every thread is done with the last block's values and probabilities (and sq is in)
        step = ["__syncthreads();"]
        step += self._stage("skv", g.bk, a.head_dim, "kb", a.keys, "kp", self.k_row, a.k_transposed)
        step += ["__syncthreads();", *self._scores(), *self._score_expression(), *self._online_softmax()]
        step += ["__syncthreads();"]  # every thread is done with the keys
        step += self._stage("skv", g.bk, a.value_dim, "kb", a.keys, "vp", self.v_row, False)
        step += ["__syncthreads();", *self._values()]
        body += ["  " + x for x in step] + ["}", *self._store()]
        out += ["    " + x for x in body]
        return [*out, "  }", "}"]

    def _bases(self, qblocks: int) -> list[str]:
        """The task's batch indices, first query row, and its Q, K, V and output bases."""
        a, c = self.a, self.c
        lines = [f"const long long i0 = (task % {qblocks}LL) * {self.g.bq}LL;",
                 f"const long long flat = task / {qblocks}LL;"]
        batch = batch_names(len(a.batch))
        stride = 1
        for name, extent in reversed(list(zip(batch, a.batch, strict=True))):
            lines.append(f"const long long {name} = flat / {stride}LL % {extent}LL;")
            stride *= extent
        # each operand's base: its row and column axes at 0
        writer = CudaExprWriter(c.inputs, {b: b for b in batch} | {x: "0" for x in "ijrd"}, self.counter)
        offsets = {role: cexpr.flat_offset(c.inputs[ld.input].shape, [writer.emit(x) for x in ld.indices])
                   for role, ld in (("qp", a.q), ("kp", a.k), ("vp", a.v))}
        lines += writer.lines
        for role, ld in (("qp", a.q), ("kp", a.k), ("vp", a.v)):
            lines.append(f"const float* __restrict__ {role} = in{ld.input} + {offsets[role]};")
        base = cexpr.flat_offset(c.shape, [x if x in batch else "0" for x in a.out_axes])
        lines.append(f"float* __restrict__ op = out + {base};")
        return lines + [f"(void){b};" for b in batch]

    def _stage(self, array: str, rows: int, cols: int, first: str, extent: int, base: str, stride: int,
               transposed: bool) -> list[str]:
        """`array`[x][y] = row `first` + x, column y of the operand at `base` (rows `stride`
        apart; `transposed`: columns `stride` apart, rows contiguous), 0 past the last row.
        The threads walk the operand's contiguous axis together (coalesced reads)."""
        g = self.g
        inner, outer = ("x", "y") if transposed else ("y", "x")
        at = f"y * {stride}LL + row" if transposed else f"row * {stride}LL + y"
        return [f"for (int e = threadIdx.x; e < {rows * cols}; e += {g.threads}) {{",
                f"  const int {inner} = e % {rows if transposed else cols}, {outer} = e / {rows if transposed else cols};",
                f"  const long long row = {first} + x;",
                f"  {array}[x][y] = row < {extent}LL ? {base}[{at}] : 0.0f;",
                "}"]

    def _init(self) -> list[str]:
        g = self.g
        return [f"float top[{g.rows}], sum[{g.rows}], acc[{g.rows}][{self.columns}];",
                "#pragma unroll",
                f"for (int u = 0; u < {g.rows}; ++u) {{",
                "  top[u] = -INFINITY;",
                "  sum[u] = 0.0f;",
                "  #pragma unroll",
                f"  for (int w = 0; w < {self.columns}; ++w) acc[u][w] = 0.0f;",
                "}"]

    def _scores(self) -> list[str]:
        """s[u][v]: the score of the thread's row u against its key v of the block (the
        block's key `lane + team * v`), a sequential sum over the head axis."""
        g, n = self.g, self.scores
        return [f"float s[{g.rows}][{n}];",
                "#pragma unroll",
                f"for (int u = 0; u < {g.rows}; ++u)",
                "  #pragma unroll",
                f"  for (int v = 0; v < {n}; ++v) s[u][v] = 0.0f;",
                "#pragma unroll 4",
                f"for (int r = 0; r < {self.a.head_dim}; ++r) {{",
                f"  float qv[{g.rows}], kv[{n}];",
                "  #pragma unroll",
                f"  for (int u = 0; u < {g.rows}; ++u) qv[u] = sq[trow + {self.ty} * u][r];",
                "  #pragma unroll",
                f"  for (int v = 0; v < {n}; ++v) kv[v] = skv[lane + {g.team} * v][r];",
                "  #pragma unroll",
                f"  for (int u = 0; u < {g.rows}; ++u)",
                "    #pragma unroll",
                f"    for (int v = 0; v < {n}; ++v) s[u][v] += qv[u] * kv[v];",
                "}"]

    def _score_expression(self) -> list[str]:
        """The group's score expression on each score (a row past the last evaluates at the
        last row, never stored); a key past the last scores -inf."""
        a, g = self.a, self.g
        inner = [f"const long long iq = i0 + trow + {self.ty} * u < {a.queries}LL ? "
                 f"i0 + trow + {self.ty} * u : {a.queries - 1}LL;",
                 f"const long long jk = kb + lane + {g.team} * v;",
                 f"const long long jc = jk < {a.keys}LL ? jk : {a.keys - 1}LL;"]
        value = "s[u][v]"
        if a.score != Var(ACC, "float32"):
            names = {b: b for b in batch_names(len(a.batch))} | {"i": "iq", "j": "jc", ACC: "s[u][v]"}
            value = emit(self.c.inputs, names, self.counter, a.score, inner, "")
        inner.append(f"s[u][v] = jk < {a.keys}LL ? {value} : -INFINITY;")
        return ["#pragma unroll",
                f"for (int u = 0; u < {g.rows}; ++u) {{",
                "  #pragma unroll",
                f"  for (int v = 0; v < {self.scores}; ++v) {{",
                *("    " + x for x in inner),
                "  }",
                "}"]

    def _team(self, var: str, op: str) -> list[str]:
        """`var` combined with `op` across the row's team (every lane gets the result)."""
        return ["  #pragma unroll",
                f"  for (int o = {self.g.team // 2}; o > 0; o >>= 1) {var} = {op.format(var, f'tf_shfl_xor({var}, o)')};"]

    def _online_softmax(self) -> list[str]:
        """Each row's running max moved to this block's, its sum and accumulators rescaled,
        the block's exponentials in sp."""
        g, n = self.g, self.scores
        return ["#pragma unroll",
                f"for (int u = 0; u < {g.rows}; ++u) {{",
                "  float mx = top[u];",
                "  #pragma unroll",
                f"  for (int v = 0; v < {n}; ++v) mx = fmaxf(mx, s[u][v]);",
                *self._team("mx", "fmaxf({}, {})"),
                # a row all -inf so far counts no exponential (exp(-inf - -inf) would be NaN)
                "  const float base = mx == -INFINITY ? 0.0f : mx;",
                "  const float alpha = top[u] == -INFINITY ? 0.0f : expf(top[u] - base);",
                "  top[u] = mx;",
                "  float total = 0.0f;",
                "  #pragma unroll",
                f"  for (int v = 0; v < {n}; ++v) {{",
                "    const float e = expf(s[u][v] - base);",
                f"    sp[trow + {self.ty} * u][lane + {g.team} * v] = e;",
                "    total += e;",
                "  }",
                *self._team("total", "{} + {}"),
                "  sum[u] = sum[u] * alpha + total;",
                "  #pragma unroll",
                f"  for (int w = 0; w < {self.columns}; ++w) acc[u][w] *= alpha;",
                "}"]

    def _values(self) -> list[str]:
        """acc[u][w] += sp[row u][j] * V[kb + j][column w] over the block's keys."""
        a, g = self.a, self.g
        # columns past the last read column 0 of the row (in bounds; never stored)
        column = (f"lane + {g.team} * w" if a.value_dim % g.team == 0
                  else f"lane + {g.team} * w < {a.value_dim} ? lane + {g.team} * w : 0")
        return [f"for (int j = 0; j < {g.bk}; ++j) {{",
                f"  float p[{g.rows}];",
                "  #pragma unroll",
                f"  for (int u = 0; u < {g.rows}; ++u) p[u] = sp[trow + {self.ty} * u][j];",
                "  #pragma unroll",
                f"  for (int w = 0; w < {self.columns}; ++w) {{",
                f"    const float vv = skv[j][{column}];",
                "    #pragma unroll",
                f"    for (int u = 0; u < {g.rows}; ++u) acc[u][w] += p[u] * vv;",
                "  }",
                "}"]

    def _store(self) -> list[str]:
        """Each of the thread's rows that exists: its output columns, acc / sum."""
        a, g = self.a, self.g
        stride = math.prod(self.c.shape[a.out_axes.index("i") + 1:])
        # all its scores -inf (sum 0) or one NaN: the row's probabilities are NaN
        value = "!(sum[u] > 0.0f) ? 0.0f : acc[u][w] * inv" if a.nan_to_zero else "acc[u][w] * inv"
        return ["#pragma unroll",
                f"for (int u = 0; u < {g.rows}; ++u) {{",
                f"  const long long i = i0 + trow + {self.ty} * u;",
                "  const float inv = 1.0f / sum[u];",
                "  #pragma unroll",
                f"  for (int w = 0; w < {self.columns}; ++w) {{",
                f"    const int d = lane + {g.team} * w;",
                f"    if (i < {a.queries}LL && d < {a.value_dim}) op[i * {stride}LL + d] = {value};",
                "  }",
                "}"]
