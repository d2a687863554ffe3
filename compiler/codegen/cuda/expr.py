"""CUDA spellings on top of the shared C expression renderer (`compiler.codegen.cexpr`).

The meaning of every TE op is rendered once, in cexpr, for C and CUDA alike;
CUDA differs only in how helpers are declared (`__device__`), how float16 is
stored (`__half`; values are still computed in float and rounded after every
op) and in the warp-shuffle helpers its reductions need.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from compiler.codegen import cexpr
from compiler.ir.dtypes import dtype
from compiler.ir.te import Expr, TensorType

value_ctype = cexpr.value_ctype
literal = cexpr.literal

# Shuffles of the narrow integer types go through int (the intrinsic has no 8/16-bit forms).
_SHUFFLES = "".join(
    f"static __device__ __forceinline__ {t} tf_shfl_xor({t} v, int m) "
    f"{{ return ({t})__shfl_xor_sync(0xffffffffu, (int)v, m); }}\n"
    for t in ("int8_t", "uint8_t", "int16_t", "uint16_t")
)

# Guarded so that several kernels can share one translation unit. Unused static
# helpers are expected, hence the suppressed "declared but never referenced".
PRELUDE = (
    "#ifndef TF_CUDA_PRELUDE\n#define TF_CUDA_PRELUDE\n#include <cuda_fp16.h>\n"
    "#pragma nv_diag_suppress 177\n"
    + cexpr.prelude("static __device__ __forceinline__")
    + "template <class T> static __device__ __forceinline__ T tf_shfl_xor(T v, int m) "
    "{ return __shfl_xor_sync(0xffffffffu, v, m); }\n"
    + _SHUFFLES
    + "#endif\n"
)


class CudaExprWriter(cexpr.ExprWriter):
    """cexpr's writer with float16 rounded through `__half` (device code has no `_Float16`)."""

    HALF_ROUND = "__half2float(__float2half({}))"
    HALF_LOAD = "__half2float({})"


def storage_ctype(dt: str) -> str:
    """The C type a buffer of `dt` holds in device memory."""
    return "__half" if dt == "float16" else dtype(dt).c_type


def round_value(dt: str, value: str) -> str:
    """`value` (of `dt`'s value type) rounded to `dt` where the value type is wider."""
    return cexpr.round_value(dt, value, CudaExprWriter)


def emit(inputs: Sequence[TensorType], names: Mapping[str, str], counter: Iterator[int],
         e: Expr, lines: list[str], indent: str) -> str:
    """Render `e` under `names`, appending its statements to `lines`; returns its value."""
    w = CudaExprWriter(inputs, names, counter)
    value = w.emit(e)
    lines += [indent + x for x in w.lines]
    return value
