"""The CUDA contraction kernel: a GEMM over shared-memory tiles and register tiles.

Each block computes a `bm x bn` tile of a contraction (the plan's `GemmGeometry`:
compiler/schedule/cuda_tile.py)
for one batch index. Per reduce step it stages a `bk x bm` slice of one
operand and a `bk x bn` slice of the other in shared memory (rows padded by one
element so that column-wise writes hit distinct banks), fetched one step ahead
through registers (cuda_gemm_stage). Each thread accumulates a `tm x tn`
register tile strided by the thread grid, so shared-memory reads and global
stores are contiguous across a warp; the epilogue (`post`) runs on the
accumulators before the store. Blocks walk the tile space grid-stride.
"""

from __future__ import annotations

import math

from compiler.codegen import cexpr
from compiler.codegen.cuda.expr import value_ctype
from compiler.codegen.cuda.gemm_stage import OperandStaging
from compiler.codegen.cuda.parts import decompose, epilogue, linear, signature
from compiler.ir.contraction import Contraction, side_extent
from compiler.ir.te import Compute
from compiler.schedule.cuda_launch import GemmGeometry, ceil_div


def render_gemm(c: Compute, m: Contraction, g: GemmGeometry, symbol: str) -> str:
    """CUDA source of the contraction kernel for `c`."""
    t = value_ctype(c.acc_dtype)
    counter = cexpr.new_counter()
    big_m, big_n = side_extent(c, m.rows), side_extent(c, m.cols)
    big_k = math.prod(a.extent for a in c.reduce_axes)
    nbm, nbn = ceil_div(big_m, g.bm), ceil_div(big_n, g.bn)
    tiles = side_extent(c, m.batch) * nbm * nbn
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
    stages = (OperandStaging(c, m, g, m.lhs, m.rows, "sa", "m0", g.bm, "a", g.prefetch_a),
              OperandStaging(c, m, g, m.rhs, m.cols, "sb", "n0", g.bn, "b", g.prefetch_b))
    for s in stages:
        lines += s.declare(ind)
    lines.append(f"{ind}{t} acc[{g.tm}][{g.tn}];")
    lines.append(f"{ind}#pragma unroll")
    lines.append(f"{ind}for (int i = 0; i < {g.tm}; ++i)")
    lines.append(f"{ind}  #pragma unroll")
    lines.append(f"{ind}  for (int j = 0; j < {g.tn}; ++j) acc[i][j] = 0;")
    # Step kn is fetched while step kd = kn - bk is computed: one fetch site, one fill
    # site, and a first pass that only fetches.
    lines += [f"{ind}for (long long kn = 0; kn < {big_k + g.bk}LL; kn += {g.bk}) {{",
              f"{ind}  const long long kd = kn - {g.bk};",
              f"{ind}  if (kn > 0) {{"]
    for s in stages:
        lines += s.fill(ind + "    ", counter)
    lines += [f"{ind}  }}", f"{ind}  __syncthreads();", f"{ind}  if (kn < {big_k}LL) {{"]
    for s in stages:
        lines += s.fetch(ind + "    ", counter)
    lines += [
        f"{ind}  }}",
        f"{ind}  if (kn > 0) {{",
        f"{ind}    #pragma unroll",
        f"{ind}    for (int kk = 0; kk < {g.bk}; ++kk) {{",
        f"{ind}      {t} ra[{g.tm}], rb[{g.tn}];",
        f"{ind}      #pragma unroll",
        f"{ind}      for (int i = 0; i < {g.tm}; ++i) ra[i] = sa[kk][tr + i * {trm}];",
        f"{ind}      #pragma unroll",
        f"{ind}      for (int j = 0; j < {g.tn}; ++j) rb[j] = sb[kk][tc + j * {tcn}];",
        f"{ind}      #pragma unroll",
        f"{ind}      for (int i = 0; i < {g.tm}; ++i)",
        f"{ind}        #pragma unroll",
        f"{ind}        for (int j = 0; j < {g.tn}; ++j) acc[i][j] += ra[i] * rb[j];",
        f"{ind}    }}",
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
