"""Math functions on GCC vectors for the explicit-SIMD paths (c/vector.py, c/softmax.py):
exp on float32, and a lane-wise max.

Why our own: a vectorized loop calls glibc's libmvec expf through the vector ABI,
and that call was 60% of a softmax. This one is inlined into the loop and is 1.8x
faster on an AVX2 host (2.10 against 3.87 ns per 8 lanes: 3072 values in L1, best
of 2000 runs), within 1 ulp of the correctly rounded exp (checked on
32M points over [-120, 120] and the special values; test_c_kernels.py repeats a
smaller sweep).

exp(x) = 2^n * exp(r) with n = round(x / ln 2) (the 1.5 * 2^23 rounding trick),
r = x - n ln 2 (ln 2 in two parts, so n * ln2_hi is exact), exp(r) by a degree-6
minimax polynomial in Horner form, and 2^n added to its exponent field. With AVX2
(AVX-512) the core steps in ln2 / 8 (ln2 / 16) instead, 2^(i/8) (2^(i/16)) from a
table in a register (see _TABLE): every float in [-110, 110] within 0.985 (0.77) ulp
of the exact exp (exhaustive sweeps). On a Zen 5 core the 16-entry table is 1.41 ns
per 16 lanes against the polynomial's 1.62, and the softmax 128x768 kernel went
19.0 -> 15.7 us with it, maxps and a mask-register lane test (below).
A vector with a lane beyond |x| <= 86.5 (or a NaN) takes the wide path instead:
x clamped to [-104, 89] (a NaN stays NaN through the compares), and 2^n applied
in two halves so that results overflow to inf and underflow through the
denormals to 0 as expf's do. `exp_function(lanes, nonpositive=True)` names the
same exp for arguments known to be <= 0 (or NaN), softmax's x - max(x): its range
check is one compare instead of two operations (a softmax row: -5%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# exp(r) ~ 1 + r + r^2 q(r) on |r| <= ln2 / 2, q of degree 4 fitted (weighted least squares
# iterated to minimax, Lawson's method) to the relative error of exp: 3e-9 in exact
# arithmetic, far below float32's half ulp, so one degree less than Cephes' 7 and one
# FMA fewer per vector (the softmax 128x768 kernel: 61.8 -> 58.6 us, medians interleaved).
_POLY = ("0x1.6a242ap-10f", "0x1.1239d0p-7f", "0x1.5558f2p-5f", "0x1.555492p-3f", "0x1.fffffcp-2f", "1.0f", "1.0f")
# Where the ISA permutes lanes by index (AVX2: 8 lanes, AVX-512: 16), x = (N j + i) ln2 / N
# + r instead, N the lane count: 2^(i/N) from an N-entry table held in one register (one
# vpermps; the entry's rounding error comes back from a second table of corrections), so
# |r| <= ln2 / 2N and exp(r) - 1 ~ r + r^2 (c2 + c3 r), fitted the same way per N (8: 3e-8,
# 16: 1.6e-9). Two FMAs fewer per vector; within 1 ulp like the polynomial (every float in
# [-110, 110]: 0.985 ulp worst with 8 entries, 0.77 with 16). Softmax 128x768, a C
# replica of its row kernel on AVX2: -7%.
# 2^(i/16) rounded to float32, and (2^(i/16) - entry) / entry; 8 lanes take the even entries.
_TABLE = ("0x1p+0f", "0x1.0b5586p+0f", "0x1.172b84p+0f", "0x1.2387a6p+0f", "0x1.306fe0p+0f", "0x1.3dea64p+0f",
          "0x1.4bfdaep+0f", "0x1.5ab07ep+0f", "0x1.6a09e6p+0f", "0x1.7a1148p+0f", "0x1.8ace54p+0f",
          "0x1.9c4918p+0f", "0x1.ae89fap+0f", "0x1.c199bep+0f", "0x1.d5818ep+0f", "0x1.ea4afap+0f")
_TABLE_FIX = ("0.0f", "0x1.8d96d4p-25f", "-0x1.9c0c22p-27f", "0x1.964904p-25f", "0x1.125002p-25f",
              "0x1.370be4p-25f", "-0x1.0a3550p-25f", "-0x1.00d8acp-27f", "0x1.26055cp-26f",
              "-0x1.05cb44p-25f", "0x1.67a1cap-28f", "0x1.a3b5e4p-28f", "-0x1.f9c304p-27f",
              "-0x1.6961b4p-28f", "-0x1.a5217cp-28f", "0x1.61428ep-28f")


@dataclass(frozen=True)
class _LaneTable:
    """The table core for one lane count N: its ISA guard, lane permute, ln2 / N in two
    parts (hi has 12 significant bits, so m * hi is exact for every |m| <= 2^12) and
    the fitted (c3, c2)."""

    guard: str
    permute: str  # C format of a call: {table} a float vector, {index} an int vector, {vector} its type
    ln2_hi: str
    ln2_lo: str
    poly: tuple[str, str]


_LANE_TABLES = {
    8: _LaneTable("__AVX2__", "__builtin_ia32_permvarsf256({table}, {index})", "0x1.62e000p-4f", "0x1.0bfbe8p-18f",
                  ("0x1.555656p-3f", "0x1.000874p-1f")),
    16: _LaneTable("__AVX512F__", "__builtin_ia32_permvarsf512_mask({table}, {index}, ({vector}){{0}}, 0xFFFF)",
                   "0x1.62e000p-5f", "0x1.0bfbe8p-19f", ("0x1.55564ep-3f", "0x1.000222p-1f")),
}


def exp_function(lanes: int, nonpositive: bool = False, portable: bool = False) -> str:
    """Name of the float32 exp on `lanes`-lane vectors that `exp_definitions` defines;
    `nonpositive`: the one for arguments <= 0 or NaN only (others give wrong results);
    `portable`: the polynomial core at every lane count (no table), so each lane's result
    is the same whatever the lane count and ISA (given FMA contraction alike)."""
    return f"tf_exp{'_nonpositive' * nonpositive}{'_portable' * portable}_f32x{lanes}"


def exp_definitions(lanes: int, portable: bool = False) -> dict[str, list[str]]:
    """File-scope C (no includes needed) defining `exp_function(lanes, portable=portable)`
    and its nonpositive twin: name -> its lines, in dependency order (a unit that needs
    two widths defines a shared piece once)."""
    v, m, u, name = f"tf_f32x{lanes}", f"tf_i32x{lanes}", f"tf_u32x{lanes}", exp_function(lanes, portable=portable)
    return {**any_lane(lanes), **float_vector(lanes), **unsigned_vector(lanes), name: [
        *_core(lanes, f"{name}_core", portable),
        f"static inline {v} {name}_wide({v} x) {{",
        f"  const {m} low = x < -104.0f, high = x > 89.0f;",
        f"  x = ({v})((low & ({m})(({v}){{0}} - 104.0f)) | (~low & ({m})x));",
        f"  x = ({v})((high & ({m})(({v}){{0}} + 89.0f)) | (~high & ({m})x));",
        f"  {m} k;",
        f"  const {v} p = {name}_core(x, &k);",
        f"  const {m} n = k >> 23, n1 = n >> 1, n2 = n - n1;  /* n in [-150, 128] */",
        f"  return p * ({v})((n1 + 127) << 23) * ({v})((n2 + 127) << 23);",
        "}",
        # |x| <= 86.5 keeps n in [-125, 125], where p * 2^n is a normal number: adding
        # k = n << 23 to p's bits scales it. Where x is known to be <= 0, one compare
        # checks that (a NaN fails it too).
        *[line for fn, wide in ((name, f"~(({v})(({m})x & 0x7fffffff) <= 86.5f)"),
                                (exp_function(lanes, nonpositive=True, portable=portable), "~(x >= -86.5f)"))
          for line in (
              f"static inline {v} {fn}({v} x) {{",
              f"  const {m} wide = {wide};",
              f"  if (__builtin_expect(tf_any_i32x{lanes}(wide), 0)) return {name}_wide(x);",
              f"  {m} k;",
              f"  const {v} p = {name}_core(x, &k);",
              f"  return ({v})(({u})p + ({u})k);",
              "}")],
    ]}


def _core(lanes: int, core: str, portable: bool) -> list[str]:
    """`p = core(x, &k)`: exp(x) = p * 2^n with k = n << 23 (x clamped to [-104, 89] or less),
    by the table where the ISA has a lane permute (unless `portable`), by the polynomial elsewhere."""
    v, m, u = f"tf_f32x{lanes}", f"tf_i32x{lanes}", f"tf_u32x{lanes}"
    poly = [
        f"static inline {v} {core}({v} x, {m}* k) {{",
        "  /* x = n ln2 + r, |r| <= ln2 / 2; t is n + 1.5 * 2^23 (n in its low bits) */",
        f"  const {v} t = x * 1.44269504088896341f + 12582912.0f;",
        f"  const {v} n = t - 12582912.0f;",
        f"  {v} r = x - n * 0.693359375f;",
        "  r = r - n * -2.12194440e-4f;",
        f"  {v} p = r * {_POLY[0]} + {_POLY[1]};",
        *[f"  p = p * r + {c};" for c in _POLY[2:]],
        f"  *k = ({m})(({u})t << 23);",
        "  return p;",
        "}"]
    spec = None if portable else _LANE_TABLES.get(lanes)
    if spec is None:
        return poly
    step = len(_TABLE) // lanes  # table entries 2^(i / lanes): every step-th of the 16
    shift = 23 - lanes.bit_length() + 1  # m << shift drops i's bits: n << 23

    def table(values: tuple[str, ...]) -> str:
        return spec.permute.format(table=f"({v}){{{', '.join(values[::step])}}}", index=f"({m})t", vector=v)
    return [
        f"#ifdef {spec.guard}",
        f"static inline {v} {core}({v} x, {m}* k) {{",
        f"  /* x = m ln2 / {lanes} + r, |r| <= ln2 / {2 * lanes}, m = {lanes} n + i; t is m + 1.5 * 2^23 */",
        f"  const {v} t = x * {lanes / math.log(2)!r}f + 12582912.0f;",
        f"  const {v} m = t - 12582912.0f;",
        f"  {v} r = x - m * {spec.ln2_hi};  /* ln2 / {lanes} in two parts: m * hi is exact */",
        f"  r = r - m * {spec.ln2_lo};",
        f"  {v} q = r * {spec.poly[0]} + {spec.poly[1]};",
        "  q = q * r + 1.0f;",
        "  q = q * r;  /* exp(r) - 1 */",
        f"  const {v} s = {table(_TABLE)};",
        f"  q = q + {table(_TABLE_FIX)};",
        f"  *k = ({m})((({u})t << {shift}) & 0xFF800000u);  /* n << 23: the bits of m above i */",
        "  return q * s + s;",
        "}",
        "#else",
        *poly,
        "#endif"]


def max_function(lanes: int) -> str:
    """Name of the lane-wise `a > b ? a : b` on float32 vectors that `max_definitions`
    defines (a NaN in either operand gives b's lane, as x86's maxps does)."""
    return f"tf_max_f32x{lanes}"


def max_definitions(lanes: int) -> dict[str, list[str]]:
    """File-scope C defining `max_function(lanes)`: one maxps where SSE / AVX has it
    (gcc does not turn the compare-and-select into one: it keeps NaN semantics)."""
    v, m, name = f"tf_f32x{lanes}", f"tf_i32x{lanes}", max_function(lanes)
    builtin = {4: ("__SSE__", "__builtin_ia32_maxps(a, b)"), 8: ("__AVX__", "__builtin_ia32_maxps256(a, b)"),
               16: ("__AVX512F__", "__builtin_ia32_maxps512_mask(a, b, b, 0xFFFF, 4)")}.get(lanes)
    select = [f"  const {m} gt = a > b;", f"  return ({v})((gt & ({m})a) | (~gt & ({m})b));"]
    body = select if builtin is None else [f"#ifdef {builtin[0]}", f"  return {builtin[1]};", "#else",
                                           *select, "#endif"]
    return {**any_lane(lanes), **float_vector(lanes), name: [f"static inline {v} {name}({v} a, {v} b) {{", *body, "}"]}


def float_vector(lanes: int) -> dict[str, list[str]]:
    """The definition of `tf_f32x<lanes>`, `lanes` floats."""
    v = f"tf_f32x{lanes}"
    return {v: [f"typedef float {v} __attribute__((vector_size({4 * lanes})));"]}


def unsigned_vector(lanes: int) -> dict[str, list[str]]:
    """The definition of `tf_u32x<lanes>`, `lanes` unsigned 32-bit integers."""
    u = f"tf_u32x{lanes}"
    return {u: [f"typedef unsigned {u} __attribute__((vector_size({4 * lanes})));"]}


def any_lane(lanes: int) -> dict[str, list[str]]:
    """The mask type `tf_i32x<lanes>` and `int tf_any_i32x<lanes>(mask)`: whether any
    lane is set. A sign-bit move on SSE / AVX, a test into a mask register on AVX-512,
    halves OR-ed together above 8 lanes otherwise, a loop where none applies."""
    m = f"tf_i32x{lanes}"
    head = [f"typedef int {m} __attribute__((vector_size({4 * lanes})));", f"static inline int tf_any_i32x{lanes}({m} m) {{"]
    if lanes > 8 and lanes % 2 == 0:
        half = f"tf_i32x{lanes // 2}"
        test = ["#ifdef __AVX512F__", "  return __builtin_ia32_ptestmd512(m, m, 0xFFFF) != 0;", "#else"]
        return {**any_lane(lanes // 2), m: [
            *head,
            *(test if lanes == 16 else []),
            f"  {half} lo, hi;",
            "  __builtin_memcpy(&lo, &m, sizeof lo);",
            "  __builtin_memcpy(&hi, (const char*)&m + sizeof lo, sizeof hi);",
            f"  return tf_any_i32x{lanes // 2}(lo | hi);",
            *(["#endif"] if lanes == 16 else []),
            "}"]}
    loop = ["  int any = 0;", f"  for (int i = 0; i < {lanes}; ++i) any |= m[i];", "  return any;"]
    builtin = {8: ("__AVX__", "__builtin_ia32_movmskps256"), 4: ("__SSE__", "__builtin_ia32_movmskps")}.get(lanes)
    if builtin is None:
        return {m: [*head, *loop, "}"]}
    guard, fn = builtin
    return {m: [*head, f"#ifdef {guard}", f"  return {fn}((float __attribute__((vector_size({4 * lanes}))))m);",
                "#else", *loop, "#endif", "}"]}
