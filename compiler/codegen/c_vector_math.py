"""Math functions on GCC vectors for the explicit-SIMD paths (c_vector.py, c_softmax.py):
exp on float32, and a lane-wise max.

Why our own: a vectorized loop calls glibc's libmvec expf through the vector ABI,
and that call was 60% of a softmax. This one is inlined into the loop and is 1.8x
faster on an AVX2 host (2.10 against 3.87 ns per 8 lanes: 3072 values in L1, best
of 2000 runs), within 1 ulp of the correctly rounded exp (checked on
32M points over [-120, 120] and the special values; test_c_kernels.py repeats a
smaller sweep).

exp(x) = 2^n * exp(r) with n = round(x / ln 2) (the 1.5 * 2^23 rounding trick),
r = x - n ln 2 (ln 2 in two parts, so n * ln2_hi is exact), exp(r) by a degree-6
minimax polynomial in Horner form, and 2^n added to its exponent field.
A vector with a lane beyond |x| <= 86.5 (or a NaN) takes the wide path instead:
x clamped to [-104, 89] (a NaN stays NaN through the compares), and 2^n applied
in two halves so that results overflow to inf and underflow through the
denormals to 0 as expf's do. `exp_function(lanes, nonpositive=True)` names the
same exp for arguments known to be <= 0 (or NaN), softmax's x - max(x): its range
check is one compare instead of two operations (a softmax row: -5%).
"""

from __future__ import annotations

# exp(r) ~ 1 + r + r^2 q(r) on |r| <= ln2 / 2, q of degree 4 fitted (weighted least squares
# iterated to minimax, Lawson's method) to the relative error of exp: 3e-9 in exact
# arithmetic, far below float32's half ulp, so one degree less than Cephes' 7 and one
# FMA fewer per vector (the softmax 128x768 kernel: 61.8 -> 58.6 us, medians interleaved).
_POLY = ("0x1.6a242ap-10f", "0x1.1239d0p-7f", "0x1.5558f2p-5f", "0x1.555492p-3f", "0x1.fffffcp-2f", "1.0f", "1.0f")


def exp_function(lanes: int, nonpositive: bool = False) -> str:
    """Name of the float32 exp on `lanes`-lane vectors that `exp_definitions` defines;
    `nonpositive`: the one for arguments <= 0 or NaN only (others give wrong results)."""
    return f"tf_exp{'_nonpositive' * nonpositive}_f32x{lanes}"


def exp_definitions(lanes: int) -> dict[str, list[str]]:
    """File-scope C (no includes needed) defining `exp_function(lanes)`: name -> its lines,
    in dependency order (a unit that needs two widths defines a shared piece once)."""
    v, m, u, name = f"tf_f32x{lanes}", f"tf_i32x{lanes}", f"tf_u32x{lanes}", exp_function(lanes)
    return {**_any_lane(lanes), **_float_vector(lanes), name: [
        f"typedef unsigned {u} __attribute__((vector_size({4 * lanes})));",
        "/* exp(r) for |r| <= ln2 / 2, for x = n ln2 + r; *t is n + 1.5 * 2^23 (n in its low bits). */",
        f"static inline {v} {name}_core({v} x, {v}* t) {{",
        "  *t = x * 1.44269504088896341f + 12582912.0f;",
        f"  const {v} n = *t - 12582912.0f;",
        f"  {v} r = x - n * 0.693359375f;",
        "  r = r - n * -2.12194440e-4f;",
        f"  {v} p = r * {_POLY[0]} + {_POLY[1]};",
        *[f"  p = p * r + {c};" for c in _POLY[2:]],
        "  return p;",
        "}",
        f"static inline {v} {name}_wide({v} x) {{",
        f"  const {m} low = x < -104.0f, high = x > 89.0f;",
        f"  x = ({v})((low & ({m})(({v}){{0}} - 104.0f)) | (~low & ({m})x));",
        f"  x = ({v})((high & ({m})(({v}){{0}} + 89.0f)) | (~high & ({m})x));",
        f"  {v} t;",
        f"  const {v} p = {name}_core(x, &t);",
        f"  const {m} n = ({m})t - 0x4B400000, n1 = n >> 1, n2 = n - n1;",
        f"  return p * ({v})((n1 + 127) << 23) * ({v})((n2 + 127) << 23);",
        "}",
        # |x| <= 86.5 keeps n in [-125, 125], where p * 2^n is a normal number: adding
        # n << 23 to p's bits scales it (t's bits shifted left by 23 are n << 23). Where x
        # is known to be <= 0, one compare checks that (a NaN fails it too).
        *[line for fn, wide in ((name, f"~(({v})(({m})x & 0x7fffffff) <= 86.5f)"),
                                (exp_function(lanes, nonpositive=True), "~(x >= -86.5f)"))
          for line in (
              f"static inline {v} {fn}({v} x) {{",
              f"  const {m} wide = {wide};",
              f"  if (__builtin_expect(tf_any_i32x{lanes}(wide), 0)) return {name}_wide(x);",
              f"  {v} t;",
              f"  const {v} p = {name}_core(x, &t);",
              f"  return ({v})(({u})p + (({u})t << 23));",
              "}")],
    ]}


def max_function(lanes: int) -> str:
    """Name of the lane-wise `a > b ? a : b` on float32 vectors that `max_definitions`
    defines (a NaN in either operand gives b's lane, as x86's maxps does)."""
    return f"tf_max_f32x{lanes}"


def max_definitions(lanes: int) -> dict[str, list[str]]:
    """File-scope C defining `max_function(lanes)`: one maxps where SSE / AVX has it
    (gcc does not turn the compare-and-select into one: it keeps NaN semantics)."""
    v, m, name = f"tf_f32x{lanes}", f"tf_i32x{lanes}", max_function(lanes)
    builtin = {8: ("__AVX__", "__builtin_ia32_maxps256"), 4: ("__SSE__", "__builtin_ia32_maxps")}.get(lanes)
    select = [f"  const {m} gt = a > b;", f"  return ({v})((gt & ({m})a) | (~gt & ({m})b));"]
    body = select if builtin is None else [f"#ifdef {builtin[0]}", f"  return {builtin[1]}(a, b);", "#else",
                                           *select, "#endif"]
    return {**_any_lane(lanes), **_float_vector(lanes), name: [f"static inline {v} {name}({v} a, {v} b) {{", *body, "}"]}


def _float_vector(lanes: int) -> dict[str, list[str]]:
    v = f"tf_f32x{lanes}"
    return {v: [f"typedef float {v} __attribute__((vector_size({4 * lanes})));"]}


def _any_lane(lanes: int) -> dict[str, list[str]]:
    """The mask type `tf_i32x<lanes>` and `int tf_any_i32x<lanes>(mask)`: whether any
    lane is set. A sign-bit move on SSE / AVX, halves OR-ed together above 8 lanes, a
    loop where neither applies."""
    m = f"tf_i32x{lanes}"
    head = [f"typedef int {m} __attribute__((vector_size({4 * lanes})));", f"static inline int tf_any_i32x{lanes}({m} m) {{"]
    if lanes > 8 and lanes % 2 == 0:
        half = f"tf_i32x{lanes // 2}"
        return {**_any_lane(lanes // 2), m: [
            *head,
            f"  {half} lo, hi;",
            "  __builtin_memcpy(&lo, &m, sizeof lo);",
            "  __builtin_memcpy(&hi, (const char*)&m + sizeof lo, sizeof hi);",
            f"  return tf_any_i32x{lanes // 2}(lo | hi);",
            "}"]}
    loop = ["  int any = 0;", f"  for (int i = 0; i < {lanes}; ++i) any |= m[i];", "  return any;"]
    builtin = {8: ("__AVX__", "__builtin_ia32_movmskps256"), 4: ("__SSE__", "__builtin_ia32_movmskps")}.get(lanes)
    if builtin is None:
        return {m: [*head, *loop, "}"]}
    guard, fn = builtin
    return {m: [*head, f"#ifdef {guard}", f"  return {fn}((float __attribute__((vector_size({4 * lanes}))))m);",
                "#else", *loop, "#endif", "}"]}
