"""Pieces every CUDA kernel shape shares: the entry signature, index arithmetic,
the reduction's identity and combine, and the epilogue that stores one output.

Only generated identifiers are written: pointers `out`, `in0`.. (the names
cexpr's loads use), axis values named by the caller; nothing of the model's
names reaches the source.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

from compiler.codegen import cexpr
from compiler.codegen.cuda.expr import emit, literal, round_value, storage_ctype, value_ctype
from compiler.ir.te import ACC, INIT, Compute
from compiler.schedule.cuda_launch import WARP

# Index spaces up to this size are split in 32-bit arithmetic; the margin covers
# the few rows past the end that a last block may compute and discard.
INT_INDEX_LIMIT = 1 << 30


def signature(c: Compute, symbol: str, threads: int, out: str = "out", prefix: str = "in") -> str:
    """`extern "C" __global__` entry point with the plan's ABI: output first, then inputs
    (parameters `out`, `in0`.. unless a kernel that re-points those names per part asks
    for others)."""
    params = [f"{storage_ctype(c.dtype)}* __restrict__ {out}"]
    params += [f"const {storage_ctype(t.dtype)}* __restrict__ {prefix}{i}"
               for i, t in enumerate(c.inputs)]
    return (f'extern "C" __global__ void __launch_bounds__({threads}) '
            f"{symbol}({', '.join(params)})")


def decompose(flat: str, names: Sequence[str], extents: Sequence[int], indent: str) -> list[str]:
    """Statements splitting row-major index `flat` into one value per axis (innermost fastest).

    In 32-bit arithmetic when the index space is far below 2^31 (a GPU divides
    64-bit integers with a long instruction sequence), else in 64-bit.
    """
    if not names:
        return []
    small = math.prod(extents) <= INT_INDEX_LIMIT
    ctype = "int" if small else "long long"
    lines, rest = [], flat
    if small:
        rest = f"{names[-1]}_f"
        lines.append(f"{indent}const int {rest} = (int)({flat});")
    for d in reversed(range(1, len(names))):
        lines.append(f"{indent}const {ctype} {names[d]} = {rest} % {extents[d]};")
        lines.append(f"{indent}const {ctype} {names[d]}_q = {rest} / {extents[d]};")
        rest = f"{names[d]}_q"
    lines.append(f"{indent}const {ctype} {names[0]} = {rest};")
    return lines


def linear(values: Sequence[str], shape: Sequence[int]) -> str:
    """Row-major offset of `values` in a tensor of `shape` (64-bit)."""
    terms, stride = [], 1
    for v, n in zip(reversed(values), reversed(shape), strict=True):
        terms.append(v if stride == 1 else f"{v} * {stride}LL")
        stride *= n
    return " + ".join(reversed(terms)) if terms else "0"


def identity(c: Compute) -> str:
    """The reduction's initial accumulator value."""
    assert c.reduce_op is not None
    return literal(INIT[c.reduce_op](c.acc_dtype), c.acc_dtype)


def combine(c: Compute, acc: str, value: str) -> str:
    """C text of the accumulator after folding in `value`. A float16 accumulator stays a
    float until the epilogue rounds it once, as in the C backend and numpy's float16 sums
    (rounding after every fold would make the result depend on the summation order)."""
    assert c.reduce_op is not None
    return cexpr.combine(c.reduce_op, c.acc_dtype, acc, value)


def _butterfly(c: Compute, width: int, ind: str) -> list[str]:
    """Combine `acc` across `width` lanes with xor shuffles; every lane gets the result."""
    if width <= 1:
        return []
    # The shuffle goes to a temporary first: the combine may name its operand
    # twice, or behind a short-circuit, and every lane must shuffle exactly once.
    return [
        f"{ind}#pragma unroll",
        f"{ind}for (int o = {width // 2}; o > 0; o >>= 1) {{",
        f"{ind}  const {value_ctype(c.acc_dtype)} other = tf_shfl_xor(acc, o);",
        f"{ind}  acc = {combine(c, 'acc', 'other')};",
        f"{ind}}}",
    ]


def team_reduce(c: Compute, warps: int, part: str, warp: str, lane: str, ind: str) -> list[str]:
    """Combine `acc` over a team of `warps` warps: shuffles within each warp, then each
    warp's lane 0 leaves its value in shared slots `part[warp]` and every warp combines
    the slots. `warp` / `lane` are the C expressions of the thread's warp in the team and
    lane in the warp; every lane of the team ends with the result."""
    lines = _butterfly(c, WARP, ind)
    if warps > 1:
        lines += [
            f"{ind}if ({lane} == 0) {part}[{warp}] = acc;",
            f"{ind}__syncthreads();",
            f"{ind}acc = {lane} < {warps} ? {part}[{lane}] : {identity(c)};",
            *_butterfly(c, warps, ind),
            f"{ind}__syncthreads();",
        ]
    return lines


def epilogue(c: Compute, acc: str | None, axis_values: Mapping[str, str], offset: str,
             counter: Iterator[int], indent: str) -> list[str]:
    """Statements storing one output: `post` (when given) on `acc`, cast, write at `offset`.

    `acc` is the accumulator's C expression for reductions; for element-wise
    Computes it is None and the body is evaluated here.
    """
    lines: list[str] = []
    names = dict(axis_values)
    if acc is not None:
        acc = round_value(c.acc_dtype, acc)  # the accumulator's dtype, once (see `combine`)
        names[ACC] = acc
    if acc is None:
        expr = c.body
    elif c.post is not None:
        expr = c.post
    else:
        expr = None
    value = acc if expr is None else emit(c.inputs, names, counter, expr, lines, indent)
    dt = c.acc_dtype if expr is None else expr.dtype
    stored = cexpr.render_call("cast", [value], [dt], c.dtype) if dt != c.dtype else value
    if c.dtype == "float16":
        stored = f"__float2half({stored})"
    lines.append(f"{indent}out[{offset}] = {stored};")
    return lines
