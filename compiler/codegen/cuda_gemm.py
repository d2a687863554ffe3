"""The CUDA contraction kernel: a sum over a product of two loads, as a tiled GEMM.

Matmul, batched matmul and convolution (as implicit GEMM) all have the form
`out[s] = post(sum_k x[..] * y[..])`. Spatial axes read by only one operand
become that operand's side (rows or cols), axes read by both (or neither)
are batch axes; the reduce axes flatten to K. Each block stages a `bk x bm`
slice of one operand and a `bk x bn` slice of the other in shared memory
(rows padded by one element so column-wise writes hit distinct banks), and
each thread accumulates a `tm x tn` register tile, strided by the thread grid
so that shared-memory reads and global stores are both contiguous across a
warp. Operands that are plain row-major tensors with a 16-byte-aligned base
are staged with 128-bit loads. The side holding the output's innermost axis
is mapped to the fast thread index, so stores coalesce.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from compiler.codegen import cexpr
from compiler.codegen.cuda_expr import emit, value_ctype
from compiler.codegen.cuda_parts import (
    MAX_GRID,
    MAX_THREADS,
    ceil_div,
    decompose,
    epilogue,
    linear,
    pow2_at_least,
    pow2_at_most,
    signature,
)
from compiler.ir.te import Call, Compute, Const, Expr, Load, Var, walk
from compiler.schedule.plan import TileConfig

_GEMM_DTYPES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
SMEM_LIMIT = 48 * 1024  # static shared memory per block without opting in
MAX_TILE = 256


@dataclass(frozen=True)
class Contraction:
    """A Compute seen as a GEMM: the operand expressions and the axes of each side."""

    lhs: Expr  # staged along rows (the slow thread index)
    rhs: Expr  # staged along cols (the fast thread index)
    batch: tuple[int, ...]  # spatial axis positions
    rows: tuple[int, ...]
    cols: tuple[int, ...]


@dataclass(frozen=True)
class GemmGeometry:
    """Block tile (bm x bn outputs, bk deep) and register tile (tm x tn) per thread."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)


def _vars(e: Expr) -> set[str]:
    return {x.name for x in walk(e) if isinstance(x, Var)}


def _plain_load(e: Expr) -> Load | None:
    """The load under any casts, if the operand is one load with load-free indices."""
    while isinstance(e, Call) and e.op == "cast":
        e = e.args[0]
    if not isinstance(e, Load):
        return None
    if any(isinstance(x, Load) for i in e.indices for x in walk(i)):
        return None
    return e


def match_contraction(c: Compute) -> Contraction | None:
    """The Compute as a contraction, or None when it is not `sum(x * y)` with two sides."""
    if c.reduce_op != "sum" or not c.reduce_axes or c.acc_dtype not in _GEMM_DTYPES:
        return None
    body = c.body
    if not (isinstance(body, Call) and body.op == "mul"):
        return None
    x, y = body.args
    if _plain_load(x) is None or _plain_load(y) is None:
        return None
    vx, vy = _vars(x), _vars(y)
    rows = tuple(d for d, a in enumerate(c.axes) if a.name in vx and a.name not in vy)
    cols = tuple(d for d, a in enumerate(c.axes) if a.name in vy and a.name not in vx)
    if not rows or not cols:
        return None
    batch = tuple(d for d in range(len(c.axes)) if d not in rows and d not in cols)
    if len(c.axes) - 1 in rows:  # the output's innermost axis goes to the fast threads
        return Contraction(y, x, batch, cols, rows)
    return Contraction(x, y, batch, rows, cols)


def _extent(c: Compute, axes: tuple[int, ...]) -> int:
    return math.prod(c.axes[d].extent for d in axes)


def gemm_geometry(c: Compute, m: Contraction, tile: TileConfig) -> GemmGeometry:
    """The TileConfig's tiles on the GEMM's sides, made legal: powers of two, register
    tile at most 8 x 8, 32..1024 threads where the sizes allow, shared memory under 48 KB."""
    big_m, big_n = _extent(c, m.rows), _extent(c, m.cols)
    big_k = math.prod(a.extent for a in c.reduce_axes)
    elem = _GEMM_DTYPES[c.acc_dtype]
    tm = pow2_at_most(min(8, math.prod(tile.thread[d] for d in m.rows)))
    tn = pow2_at_most(min(8, math.prod(tile.thread[d] for d in m.cols)))
    tm, tn = min(tm, pow2_at_least(big_m)), min(tn, pow2_at_least(big_n))
    bm = max(tm, min(pow2_at_most(math.prod(tile.block[d] for d in m.rows)), MAX_TILE,
                     pow2_at_least(big_m)))
    bn = max(tn, min(pow2_at_most(math.prod(tile.block[d] for d in m.cols)), MAX_TILE,
                     pow2_at_least(big_n)))
    bk = max(4, min(32, pow2_at_most(math.prod(tile.reduce_step)), pow2_at_least(big_k)))
    while (bm // tm) * (bn // tn) > MAX_THREADS:
        if bm // tm >= bn // tn:
            bm //= 2
        else:
            bn //= 2
    while (bm // tm) * (bn // tn) < 32 and (bm < big_m or bn < big_n):
        if bn < big_n:
            bn *= 2
        else:
            bm *= 2
    while bk * (bm + bn + 2) * elem > SMEM_LIMIT and bk > 4:
        bk //= 2
    while bk * (bm + bn + 2) * elem > SMEM_LIMIT:
        bm, bn = max(tm, bm // 2), max(tn, bn // 2)
    return GemmGeometry(bm, bn, bk, tm, tn)


def gemm_launch(c: Compute, m: Contraction, g: GemmGeometry) -> tuple[tuple[int, int, int],
                                                                      tuple[int, int, int]]:
    tiles = (_extent(c, m.batch) * ceil_div(_extent(c, m.rows), g.bm)
             * ceil_div(_extent(c, m.cols), g.bn))
    return (max(1, min(tiles, MAX_GRID)), 1, 1), (g.threads, 1, 1)


def render_gemm(c: Compute, m: Contraction, g: GemmGeometry, symbol: str) -> str:
    """CUDA source of the contraction kernel for `c`."""
    t = value_ctype(c.acc_dtype)
    counter = cexpr.new_counter()
    big_m, big_n = _extent(c, m.rows), _extent(c, m.cols)
    big_k = math.prod(a.extent for a in c.reduce_axes)
    nbm, nbn = ceil_div(big_m, g.bm), ceil_div(big_n, g.bn)
    tiles = _extent(c, m.batch) * nbm * nbn
    trm, tcn = g.bm // g.tm, g.bn // g.tn
    ind = "    "
    lines = [
        signature(c, symbol, g.threads) + " {",
        f"  __shared__ {t} sa[{g.bk}][{g.bm + 1}];",
        f"  __shared__ {t} sb[{g.bk}][{g.bn + 1}];",
        "  const int tid = threadIdx.x;",
        f"  const int tc = tid % {tcn};",
        f"  const int tr = tid / {tcn};",
        f"  for (long long tile = blockIdx.x; tile < {tiles}LL; tile += gridDim.x) {{",
        f"{ind}const long long m0 = (tile / {nbn}LL) % {nbm}LL * {g.bm}LL;",
        f"{ind}const long long n0 = tile % {nbn}LL * {g.bn}LL;",
    ]
    if m.batch:
        lines.append(f"{ind}const long long bb = tile / {nbn * nbm}LL;")
        lines += decompose("bb", [f"s{d}" for d in m.batch], [c.axes[d].extent for d in m.batch],
                           ind)
    lines.append(f"{ind}{t} acc[{g.tm}][{g.tn}];")
    lines.append(f"{ind}#pragma unroll")
    lines.append(f"{ind}for (int i = 0; i < {g.tm}; ++i)")
    lines.append(f"{ind}  #pragma unroll")
    lines.append(f"{ind}  for (int j = 0; j < {g.tn}; ++j) acc[i][j] = 0;")
    lines.append(f"{ind}for (long long kb = 0; kb < {big_k}LL; kb += {g.bk}) {{")
    lines += _stage(c, m, g, m.lhs, m.rows, "sa", "m0", g.bm, ind + "  ", counter)
    lines += _stage(c, m, g, m.rhs, m.cols, "sb", "n0", g.bn, ind + "  ", counter)
    lines += [
        f"{ind}  __syncthreads();",
        f"{ind}  #pragma unroll",
        f"{ind}  for (int kk = 0; kk < {g.bk}; ++kk) {{",
        f"{ind}    {t} ra[{g.tm}], rb[{g.tn}];",
        f"{ind}    #pragma unroll",
        f"{ind}    for (int i = 0; i < {g.tm}; ++i) ra[i] = sa[kk][tr + i * {trm}];",
        f"{ind}    #pragma unroll",
        f"{ind}    for (int j = 0; j < {g.tn}; ++j) rb[j] = sb[kk][tc + j * {tcn}];",
        f"{ind}    #pragma unroll",
        f"{ind}    for (int i = 0; i < {g.tm}; ++i)",
        f"{ind}      #pragma unroll",
        f"{ind}      for (int j = 0; j < {g.tn}; ++j) acc[i][j] += ra[i] * rb[j];",
        f"{ind}  }}",
        f"{ind}  __syncthreads();",
        f"{ind}}}",
    ]
    names = {c.axes[d].name: f"s{d}" for d in range(len(c.axes))}
    offset = linear([f"s{d}" for d in range(len(c.axes))], c.shape)
    lines += [
        f"{ind}#pragma unroll",
        f"{ind}for (int i = 0; i < {g.tm}; ++i) {{",
        f"{ind}  #pragma unroll",
        f"{ind}  for (int j = 0; j < {g.tn}; ++j) {{",
        f"{ind}    const long long mm = m0 + tr + i * {trm};",
        f"{ind}    const long long nn = n0 + tc + j * {tcn};",
        f"{ind}    if (mm < {big_m}LL && nn < {big_n}LL) {{",
    ]
    deep = ind + "      "
    lines += decompose("mm", [f"s{d}" for d in m.rows], [c.axes[d].extent for d in m.rows], deep)
    lines += decompose("nn", [f"s{d}" for d in m.cols], [c.axes[d].extent for d in m.cols], deep)
    lines += epilogue(c, "acc[i][j]", names, offset, counter, deep)
    lines += [f"{ind}    }}", f"{ind}  }}", f"{ind}}}"]
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def _stage(c: Compute, m: Contraction, g: GemmGeometry, operand: Expr, side: tuple[int, ...],
           smem: str, origin: str, span: int, ind: str, counter: Iterator[int]) -> list[str]:
    """Statements copying one operand's `bk x span` slice into shared memory `smem[k][s]`."""
    fast_k = _k_is_contiguous(c, operand, side)
    vec = _vector_index(c, operand, side, fast_k, span, g.bk)
    lines: list[str] = []
    scalar = _stage_loop(c, m, g, operand, side, smem, origin, span, ind, counter, fast_k, 1)
    if vec is None:
        return scalar
    lines.append(f"{ind}if ((reinterpret_cast<unsigned long long>(in{vec}) & 15ULL) == 0) {{")
    lines += _stage_loop(c, m, g, operand, side, smem, origin, span, ind + "  ", counter, fast_k,
                         4)
    lines.append(f"{ind}}} else {{")
    lines += [f"  {x}" for x in scalar]
    lines.append(f"{ind}}}")
    return lines


def _stage_loop(c: Compute, m: Contraction, g: GemmGeometry, operand: Expr, side: tuple[int, ...],
                smem: str, origin: str, span: int, ind: str, counter: Iterator[int],
                fast_k: bool, width: int) -> list[str]:
    big_s = _extent(c, side)
    big_k = math.prod(a.extent for a in c.reduce_axes)
    t = value_ctype(c.acc_dtype)
    count = g.bk * span // width
    inner = ind + "  "
    body = inner + "  "
    lines = [
        f"{ind}#pragma unroll",
        f"{ind}for (int e = tid; e < {count}; e += {g.threads}) {{",
    ]
    if fast_k:
        per = g.bk // width
        lines += [f"{inner}const int kk = e % {per} * {width};", f"{inner}const int ss = e / {per};"]
    else:
        per = span // width
        lines += [f"{inner}const int ss = e % {per} * {width};", f"{inner}const int kk = e / {per};"]
    lines += [
        f"{inner}const long long sv = {origin} + ss;",
        f"{inner}const long long kv = kb + kk;",
    ]
    names = {c.axes[d].name: f"s{d}" for d in (*m.batch, *side)}
    names |= {a.name: f"k{d}" for d, a in enumerate(c.reduce_axes)}
    split = decompose("sv", [f"s{d}" for d in side], [c.axes[d].extent for d in side], body)
    split += decompose("kv", [f"k{d}" for d in range(len(c.reduce_axes))],
                       [a.extent for a in c.reduce_axes], body)
    if width == 1:
        lines.append(f"{inner}{t} v = 0;")
        lines.append(f"{inner}if (sv < {big_s}LL && kv < {big_k}LL) {{")
        lines += split
        lines.append(f"{body}v = {emit(c.inputs, names, counter, operand, lines, body)};")
        lines.append(f"{inner}}}")
        lines.append(f"{inner}{smem}[kk][ss] = v;")
    else:
        ld = _plain_load(operand)
        assert ld is not None
        shape = c.inputs[ld.input].shape
        index = [names[i.name] if isinstance(i, Var) else f"{int(i.value)}L"  # type: ignore[attr-defined]
                 for i in ld.indices]
        lines.append(f"{inner}float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);")
        lines.append(f"{inner}if (sv < {big_s}LL && kv < {big_k}LL) {{")
        lines += split
        lines.append(f"{body}v = *reinterpret_cast<const float4*>(in{ld.input} + "
                     f"{linear(index, shape)});")
        lines.append(f"{inner}}}")
        for q, comp in enumerate("xyzw"):
            at = f"[kk + {q}][ss]" if fast_k else f"[kk][ss + {q}]"
            lines.append(f"{inner}{smem}{at} = v.{comp};")
    lines.append(f"{ind}}}")
    return lines


def _k_is_contiguous(c: Compute, operand: Expr, side: tuple[int, ...]) -> bool:
    """Whether the operand's innermost index moves with K rather than with its side's axes."""
    ld = _plain_load(operand)
    assert ld is not None
    if not ld.indices:
        return True
    inner = _vars(ld.indices[-1])
    return not any(c.axes[d].name in inner for d in side)


def _vector_index(c: Compute, operand: Expr, side: tuple[int, ...], fast_k: bool, span: int,
                  bk: int) -> int | None:
    """The input number when the operand can be staged with float4 loads, else None.

    Needs a bare float32 load (no cast, no padding) indexed by axis variables and
    constants, whose innermost index is a variable used nowhere else in the load and
    the only axis of the contiguous dimension (K or the side), with that extent, the
    tensor's row and the staged tile all multiples of 4.
    """
    if not isinstance(operand, Load) or operand.pad is not None or operand.dtype != "float32":
        return None
    if not operand.indices or not all(isinstance(i, Var | Const) for i in operand.indices):
        return None
    last = operand.indices[-1]
    if not isinstance(last, Var) or last in operand.indices[:-1]:
        return None
    inner = last.name
    if fast_k:
        axes, tile = list(c.reduce_axes), bk
    else:
        axes, tile = [c.axes[d] for d in side], span
    if len(axes) != 1 or axes[0].name != inner:
        return None
    if axes[0].extent % 4 or c.inputs[operand.input].shape[-1] % 4 or tile % 4:
        return None
    return operand.input
