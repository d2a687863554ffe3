"""Scalar tensor expressions rendered as C, with the interpreter's exact semantics.

`ExprWriter.emit` turns a TE expression into C statements (one `const`
temporary per Call / Load, shared subtrees rendered once) and returns the C
expression of its value. The meaning of every op is that of
`compiler.ir.interp` (numpy): integer division truncates and treats a zero
divisor as one, floordiv / floormod floor, `mod` takes the divisor's sign,
min / max propagate NaN, shifts past the width give 0 (or -1), bool values are
0 / 1. Signed overflow wraps (kernels are built with -fwrapv, like numpy).

float16 values are carried in `float` temporaries rounded to half after every
op (numpy computes half ops in float and rounds each result the same way). In
memory a float16 is its bit pattern (`uint16_t`), and the three helpers
`tf_h2f` (exact widening), `tf_f2h` (round to nearest even) and `tf_f16_round`
are the only places where those bits meet arithmetic. The generated C has no
`_Float16`: with it, the rounding depended on the host, since gcc on an
AVX-512-FP16 `-march` drops a `(float)(_Float16)x` round trip inside vectorized
code that it keeps elsewhere (an fp16 attention's softmax divided by the
unrounded sum and came out 1-2 half ulps off on Sapphire Rapids only).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from compiler.ir.affine import bounds, row_major_strides
from compiler.ir.dtypes import dtype
from compiler.ir.te import Call, Const, Expr, Load, TensorType, Var

# Helpers the op renderings call; static inline, so unused ones cost nothing.
PRELUDE = r"""#include <stdint.h>
#include <math.h>

static inline int64_t tf_div_i64(int64_t a, int64_t b) {
  if (b == 0) return a;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  return a / b;
}
static inline uint64_t tf_div_u64(uint64_t a, uint64_t b) { return b == 0 ? a : a / b; }
static inline int64_t tf_floordiv_i64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  return q - ((a % b != 0) & ((a < 0) != (b < 0)));
}
static inline int64_t tf_floormod_i64(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t tf_fmod_i64(int64_t a, int64_t b) {
  return (b == 0 || b == -1) ? 0 : a % b;
}
static inline uint64_t tf_udiv0(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
static inline uint64_t tf_umod0(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }
static inline uint64_t tf_pow_u64(uint64_t a, int64_t b, int is_signed) {
  if (b < 0 && is_signed) {
    int64_t s = (int64_t)a;
    return (uint64_t)(s == 1 ? 1 : s == -1 ? ((b & 1) ? -1 : 1) : 0);
  }
  uint64_t r = 1, e = (uint64_t)b;
  while (e) { if (e & 1) r *= a; a *= a; e >>= 1; }
  return r;
}
static inline int64_t tf_shl_i64(int64_t a, int64_t b, int w) {
  return (b < 0 || b >= w) ? 0 : (int64_t)((uint64_t)a << b);
}
static inline int64_t tf_shr_i64(int64_t a, int64_t b, int w) {
  return (b < 0 || b >= w) ? (a < 0 ? -1 : 0) : a >> b;
}
/* float16: stored as bits, computed in float. Integer code, so no -march can
   change where values are rounded (see the module docstring). */
static inline float tf_bits_f32(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline uint32_t tf_f32_bits(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float tf_h2f(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  /* zero or subnormal: m * 2^-24, a normal float */
    const float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
  }
  return tf_bits_f32(sign | (e == 0x1fu ? 0x7f800000u : (e + 112u) << 23) | (m << 13));
}
static inline uint16_t tf_f2h(float f) {
  const uint32_t u = tf_f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  /* NaN, quieted */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* rounds to 65520 or more: inf */
  if (a >= 0x38800000u)  /* a normal half: round the low 13 bits to nearest even */
    return (uint16_t)(sign | ((a + 0xfffu + ((a >> 13) & 1u) - (112u << 23)) >> 13));
  /* below 2^-14: adding 0.5 rounds to a multiple of 2^-24 (0.5's ulp), to nearest even */
  return (uint16_t)(sign | (tf_f32_bits(tf_bits_f32(a) + 0.5f) - 0x3f000000u));
}
static inline float tf_f16_round(float f) { return tf_h2f(tf_f2h(f)); }
static inline uint64_t tf_shl_u64(uint64_t a, uint64_t b) { return b >= 64 ? 0 : a << b; }
static inline uint64_t tf_shr_u64(uint64_t a, uint64_t b) { return b >= 64 ? 0 : a >> b; }

#define TF_FLOAT_HELPERS(T, S)                                                  \
static inline T tf_floormod##S(T a, T b) {                                      \
  if (b == 0) return fmod##S(a, b);                                             \
  T m = fmod##S(a, b);                                                          \
  if (m != 0) { if ((b < 0) != (m < 0)) m += b; } else m = copysign##S((T)0, b);\
  return m;                                                                     \
}                                                                               \
static inline T tf_mod##S(T a, T b) { return tf_floormod##S(a, b == 0 ? 1 : b); } \
static inline T tf_floordiv##S(T a, T b) {                                      \
  if (b == 0) return a / b;                                                     \
  T m = fmod##S(a, b);                                                          \
  T d = (a - m) / b;                                                            \
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;                                   \
  if (d == 0) return copysign##S((T)0, a / b);                                  \
  T f = floor##S(d);                                                            \
  return (d - f > (T)0.5) ? f + 1 : f;                                          \
}
TF_FLOAT_HELPERS(float, f)
TF_FLOAT_HELPERS(double, )

#ifdef TF_LIBMVEC
/* glibc's vector math library has SIMD variants of these; declaring them lets the
   vectorizer call them (glibc itself declares them only under -ffast-math). */
#define TF_SIMD_MATH(F) \
  __attribute__((__simd__("notinbranch"))) extern float F##f(float); \
  __attribute__((__simd__("notinbranch"))) extern double F(double);
TF_SIMD_MATH(exp) TF_SIMD_MATH(log) TF_SIMD_MATH(tanh) TF_SIMD_MATH(erf) TF_SIMD_MATH(sin)
TF_SIMD_MATH(cos) TF_SIMD_MATH(tan) TF_SIMD_MATH(asin) TF_SIMD_MATH(acos) TF_SIMD_MATH(atan)
TF_SIMD_MATH(sinh) TF_SIMD_MATH(cosh) TF_SIMD_MATH(asinh) TF_SIMD_MATH(acosh) TF_SIMD_MATH(atanh)
__attribute__((__simd__("notinbranch"))) extern float powf(float, float);
__attribute__((__simd__("notinbranch"))) extern double pow(double, double);
#endif
"""

# TE op -> C math function (float spelling gets an `f` suffix).
_MATH = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf", "sin": "sin",
    "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
    "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "floor": "floor",
    "ceil": "ceil", "round": "rint", "pow": "pow", "fmod": "fmod",
}
_INT_IDENTITY = {"floor", "ceil"}  # numpy keeps ints; its rint goes through float64
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_BIT = {"bitand": "&", "bitor": "|", "bitxor": "^"}


def value_ctype(dt: str) -> str:
    """The C type a value of `dt` is computed in (float16 is computed in float)."""
    return "float" if dt == "float16" else dtype(dt).c_type


def round_value(dt: str, value: str, writer: type[ExprWriter] | None = None) -> str:
    """`value` (of `dt`'s value type) rounded to `dt` where the value type is wider, as
    `writer` (default: C's `ExprWriter`) rounds."""
    return (writer or ExprWriter).HALF_ROUND.format(value) if dt == "float16" else value


def stored_value(dt: str, value: str) -> str:
    """The C expression that stores `value` (of `dt`'s value type) in `dt`'s memory type."""
    return f"tf_f2h({value})" if dt == "float16" else value


def stored_literal(value: float | int | bool, dt: str) -> str:
    """A C constant of `dt`'s memory type (float16: its bit pattern)."""
    if dt == "float16":
        return f"((uint16_t)0x{int(np.float16(value).view(np.uint16)):04x})"
    return literal(value, dt)


def _is_signed(dt: str) -> bool:
    return not dtype(dt).is_float and dt != "bool" and not dt.startswith("uint")


def _suffix(dt: str) -> str:
    return "" if dt == "float64" else "f"


def literal(value: float | int | bool, dt: str) -> str:
    """A C literal of dtype `dt` (float16 values rounded to half first)."""
    if dt == "bool":
        return "1" if value else "0"
    if dtype(dt).is_float:
        v = float(np.float16(value)) if dt == "float16" else float(value)
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        if dt != "float64":
            v = float(np.float32(v))
        return f"{v.hex()}{_suffix(dt)}" if v >= 0 else f"(-{(-v).hex()}{_suffix(dt)})"
    v = int(value)
    if dt == "int64":
        return "INT64_MIN" if v == -(1 << 63) else (f"{v}L" if v >= 0 else f"(-{-v}L)")
    if dt == "uint64":
        return f"{v}UL"
    return f"(({dtype(dt).c_type}){v}L)"


def combine(op: str, dt: str, a: str, b: str) -> str:
    """C expression folding value `b` into accumulator `a` for reduce op `op`."""
    if dt == "bool":
        return f"({a} | {b})" if op in {"sum", "max"} else f"({a} & {b})"
    if op == "sum":
        return f"{a} + {b}"
    if op == "prod":
        return f"{a} * {b}"
    rel = ">" if op == "max" else "<"
    if dtype(dt).is_float:
        return f"(({b} {rel} {a} || {b} != {b}) ? {b} : {a})"
    return f"({b} {rel} {a} ? {b} : {a})"


def _float_call(op: str, a: list[str], dt: str) -> str | None:
    s = _suffix(dt)
    if op in _MATH:
        return f"{_MATH[op]}{s}({', '.join(a)})"
    simple = {
        "div": f"{a[0]} / {a[-1]}",
        "abs": f"fabs{s}({a[0]})",
        "min": f"(({a[0]} < {a[-1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[-1]})",
        "max": f"(({a[0]} > {a[-1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[-1]})",
        "mod": f"tf_mod{s}({a[0]}, {a[-1]})",
        "floordiv": f"tf_floordiv{s}({a[0]}, {a[-1]})",
        "floormod": f"tf_floormod{s}({a[0]}, {a[-1]})",
        "sign": f"({a[0]} > 0 ? 1 : ({a[0]} < 0 ? -1 : ({a[0]} == 0 ? 0 : {a[0]})))",
        "reciprocal": f"1 / {a[0]}",
        "isnan": f"(isnan({a[0]}) != 0)",
        "isinf": f"(isinf({a[0]}) != 0)",
    }
    return simple.get(op)


def _int_call(op: str, a: list[str], dt: str) -> str | None:
    """Integer (and bool) renderings; narrow types are promoted to 64 bits and truncated back."""
    x, y = a[0], a[-1]
    if op in _MATH and op not in _INT_IDENTITY | {"pow", "fmod"}:  # through float64, like numpy
        args = ", ".join(f"(double){v}" for v in a)
        return f"{_MATH[op]}({args})"
    if op in _INT_IDENTITY:
        return x
    if dt == "uint64":
        unsigned = {
            "div": f"tf_div_u64({x}, {y})", "mod": f"tf_umod0({x}, {y})",
            "fmod": f"tf_umod0({x}, {y})", "floordiv": f"tf_udiv0({x}, {y})",
            "floormod": f"tf_umod0({x}, {y})", "shl": f"tf_shl_u64({x}, {y})",
            "shr": f"tf_shr_u64({x}, {y})", "pow": f"tf_pow_u64({x}, (int64_t){y}, 0)",
            "reciprocal": f"tf_div_u64(1, {x})",
        }
        if op in unsigned:
            return unsigned[op]
    bits = dtype(dt).nbytes * 8
    signed = _is_signed(dt)
    table = {
        "div": f"tf_div_i64({x}, {y})",
        "mod": f"tf_floormod_i64({x}, {y} == 0 ? 1 : {y})",
        "fmod": f"tf_fmod_i64({x}, {y})",
        "floordiv": f"tf_floordiv_i64({x}, {y})",
        "floormod": f"tf_floormod_i64({x}, {y})",
        "pow": f"tf_pow_u64((uint64_t)(int64_t){x}, (int64_t){y}, {int(signed)})",
        "shl": f"tf_shl_i64({x}, {y}, {bits})",
        "shr": f"tf_shr_i64({x}, {y}, {bits})",
        "reciprocal": f"tf_div_i64(1, {x})",
        "abs": f"({x} < 0 ? -{x} : {x})" if signed else x,
        "min": f"({x} < {y} ? {x} : {y})",
        "max": f"({x} > {y} ? {x} : {y})",
        "sign": f"(({x} > 0) - ({x} < 0))",
        "isnan": "0", "isinf": "0",
    }
    if dt == "bool":
        table.update({"add": f"({x} | {y})", "mul": f"({x} & {y})", "abs": x, "sign": x})
    return table.get(op)


def render_call(op: str, a: list[str], arg_dtypes: Sequence[str], result: str) -> str:
    """C expression of `op` over rendered arguments `a` (the value types of `arg_dtypes`)."""
    dt = arg_dtypes[-1] if op == "select" else arg_dtypes[0]
    if op == "select":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if op in _CMP:
        return f"({a[0]} {_CMP[op]} {a[1]})"
    logic = {
        "and": f"(({a[0]} != 0) && ({a[-1]} != 0))", "or": f"(({a[0]} != 0) || ({a[-1]} != 0))",
        "xor": f"(({a[0]} != 0) != ({a[-1]} != 0))", "not": f"({a[0]} == 0)",
    }
    if op in logic:
        return logic[op]
    if op == "cast":
        return f"({a[0]} != 0)" if result == "bool" else f"({value_ctype(result)}){a[0]}"
    if op in _BIT:
        return f"({a[0]} {_BIT[op]} {a[1]})"
    if op == "bitnot":
        return f"({a[0]} == 0)" if dt == "bool" else f"~{a[0]}"
    arith = {"add": "+", "sub": "-", "mul": "*"}
    special = _float_call(op, a, dt) if dtype(dt).is_float else _int_call(op, a, dt)
    if special is not None:
        return special
    if op in arith:
        return f"{a[0]} {arith[op]} {a[1]}"
    if op == "neg":
        return f"-{a[0]}"
    raise ValueError(f"no C rendering of TE op {op!r} on {dt}")


def clip_lines(v: str, a: int, n: int) -> list[str]:
    """C statements narrowing offsets [lo, hi) to those o where 0 <= v + a * o < n (a run of
    an affine index inside a tensor dimension; uses the PRELUDE's tf_floordiv_i64)."""
    if a == 0:
        return [f"if ((uint64_t)({v}) >= {n}UL) hi = 0;"]
    if a == 1:
        first, end = f"-({v})", f"{n}L - ({v})"
    elif a > 0:  # o >= ceil(-v / a), o <= floor((n - 1 - v) / a)
        first = f"tf_floordiv_i64(-({v}) + {a - 1}L, {a}L)"
        end = f"tf_floordiv_i64({n - 1}L - ({v}), {a}L) + 1"
    else:  # o >= ceil((v - n + 1) / b), o <= floor(v / b), b = -a
        b = -a
        first = f"tf_floordiv_i64(({v}) - {n - 1}L + {b - 1}L, {b}L)"
        end = f"tf_floordiv_i64({v}, {b}L) + 1"
    return [f"{{ const int64_t f = {first}; if (f > lo) lo = f; }}",
            f"{{ const int64_t e = {end}; if (e < hi) hi = e; }}"]


def flat_offset(shape: Sequence[int], idx: Sequence[str]) -> str:
    """The flat row-major element offset of rendered indices `idx` into a dense tensor of
    `shape` (dimensions of extent 1 contribute nothing)."""
    terms = [ix if s == 1 else f"{ix} * {s}L"
             for ix, s, n in zip(idx, row_major_strides(shape), shape, strict=True) if n != 1]
    return " + ".join(terms) or "0"


class ExprWriter:
    """Renders expressions as `const` temporaries appended to `lines`.

    `names` maps TE variable names (axes, `acc`) to C expressions. Temporaries
    are numbered by a counter shared across writers of one kernel, so names
    never collide between scopes. `ranges`, when given, holds each axis' full
    range: padded loads then check only the dimensions that can leave the tensor.
    """

    # How a float value is rounded to half precision and how a stored half is read
    # (the C storage is bits, see the module docstring); CUDA stores `__half`.
    HALF_ROUND = "tf_f16_round({})"
    HALF_LOAD = "tf_h2f({})"

    def __init__(self, inputs: Sequence[TensorType], names: Mapping[str, str],
                 counter: Iterator[int], ranges: Mapping[str, tuple[int, int]] | None = None) -> None:
        self.inputs = inputs
        self.names = names
        self.counter = counter
        self.ranges = ranges or {}
        self.lines: list[str] = []
        self._memo: dict[int, tuple[Expr, str]] = {}

    def _temp(self, dt: str, value: str) -> str:
        name = f"t{next(self.counter)}"
        if dt == "float16":
            value = self.HALF_ROUND.format(value)
        self.lines.append(f"const {value_ctype(dt)} {name} = {value};")
        return name

    def emit(self, e: Expr) -> str:
        """The C expression of `e`'s value (statements it needs go to `lines`)."""
        if isinstance(e, Var):
            if e.name not in self.names:
                raise ValueError(f"variable {e.name!r} is not bound here")
            return self.names[e.name]
        if isinstance(e, Const):
            return literal(e.value, e.dtype)
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if isinstance(e, Load):
            out = self._load(e)
        elif isinstance(e, Call):
            args = [self.emit(a) for a in _constant_first(e)]
            out = self._temp(e.dtype, render_call(e.op, args, [a.dtype for a in e.args], e.dtype))
        else:
            raise TypeError(f"not a TE expression: {e!r}")
        self._memo[id(e)] = (e, out)
        return out

    def _load(self, e: Load) -> str:
        if not 0 <= e.input < len(self.inputs):
            raise ValueError(f"load of input {e.input}, but the kernel has {len(self.inputs)}")
        t = self.inputs[e.input]
        if len(e.indices) != len(t.shape):
            raise ValueError(f"load of input {e.input} with {len(e.indices)} indices, rank {len(t.shape)}")
        if e.pad is not None and 0 in t.shape:
            return literal(e.pad, e.dtype)
        idx = [self.emit(i) for i in e.indices]
        element = f"in{e.input}[{flat_offset(t.shape, idx)}]"
        if e.dtype == "float16":
            element = self.HALF_LOAD.format(element)
        if e.pad is None:
            return self._temp(e.dtype, element)
        checks = []
        for ix, index, n in zip(idx, e.indices, t.shape, strict=True):
            b = bounds(index, self.ranges)
            if b is None or b[0] < 0 or b[1] >= n:
                checks.append(f"(uint64_t){ix} < {n}UL")
        if not checks:
            return self._temp(e.dtype, element)
        return self._temp(e.dtype, f"({' && '.join(checks)}) ? {element} : {literal(e.pad, e.dtype)}")


def _constant_first(e: Call) -> tuple[Expr, ...]:
    """`e`'s operands, a float max / min against a constant (ReLU, Clip) with the constant
    first: the NaN test then folds away and `c > x ? c : x` is one maxss / minss, where
    `(x > c || x != x) ? x : c` stayed a branch (a ReLU epilogue ran 2.4x slower on signs
    that a branch could not predict). Equal operands may then give the other zero's sign."""
    if (e.op in {"max", "min"} and dtype(e.dtype).is_float and isinstance(e.args[1], Const)
            and not isinstance(e.args[0], Const) and not math.isnan(float(e.args[1].value))):
        return (e.args[1], e.args[0])
    return e.args


def prelude(qualifier: str = "static inline") -> str:
    """PRELUDE with its helpers declared `qualifier` (CUDA: `static __device__ __forceinline__`)."""
    return PRELUDE.replace("static inline", qualifier)


def new_counter() -> Iterator[int]:
    """A fresh temporary-name counter for one kernel."""
    return itertools.count()
