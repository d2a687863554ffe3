"""tanh, erf and log on float32 GCC vectors, for the explicit-SIMD paths (c/vector.py).

Why: outside these, an element-wise body with tanh or erf (GPT-2's and BERT's GELU,
Mish) was vectorized by gcc into calls of glibc's libmvec, and log (Softplus) too: out
of line, and a variant per ISA (SSE, AVX2, AVX-512), whose results need not agree. The
BERT GELU row of the operator table went 335 -> 252 us with these (onnxruntime 237 ->
250, same process; GPT-2's, mostly its cube, 8970 -> 254 us). These are inlined, branch-free (but for exp's rare wide path), and
lane-independent: every lane count runs the same operations on each lane, built on the
table-free exp of c/vector_math.py (`portable`), so a value gets the same bits from an
SSE, AVX2 or AVX-512 vector wherever the ISA has FMA (every AVX2 and AVX-512 host; gcc
contracts a * b + c alike at every width). A plain x86-64 (SSE2, no FMA) build rounds
the multiply-adds separately and may differ by an ulp, within the same bounds.

Each polynomial was fitted with numpy: weighted least squares iterated to minimax
(Lawson's method) against float64 references, on the relative error of the result
(for erf's tail, the absolute error of erf), then rounded to float32.
- tanh(x) = x + x^3 P(x^2) for |x| < 0.625, P of degree 4 (4.4e-9 in exact arithmetic);
  above, 1 - 2 / (exp(2|x|) + 1) with x's sign; |x| is clamped to 10, where tanh
  rounds to 1.
- erf(x) = x + x P(z), z = x^2, for |x| < 0.875, P of degree 5 (8.6e-9; x P(z) rather
  than one product, whose leading 2 / sqrt(pi) lost an ulp to float32 rounding); above,
  1 - exp(-x^2) R(|x| - 0.875) with x's sign, R of degree 8 fitted to erfc(x) exp(x^2)
  on [0.875, 3.92] weighted by exp(-x^2) / erf(x) (6.4e-9 of erf); |x| is clamped to
  3.92, where erf rounds to 1.
- log(x) = e ln2 + log1p(f), x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) (f is
  exact), log1p(f) = f - f^2 / 2 + f^3 P(f), P of degree 7 (5.9e-9); ln2 in two parts
  so that e * ln2_hi is exact. Denormals are scaled by 2^23 first; 0 gives -inf, inf
  gives inf, negatives and NaN give NaN.
Measured against glibc's double functions rounded once to float32, exhaustively
(scripts/vector_functions_sweep.py): tanh within 1 ulp on every float of [-10.5, 10.5],
erf within 1 ulp on [-4.5, 4.5] (beyond, both are +-1, as the clamps give), log within
1 ulp on every positive float, denormals included; inf, NaN and -0 as the references
give (NaN's sign aside). The same bits at 4, 8 and 16 lanes, and under -march=native
(AVX-512) and x86-64-v3 (AVX2); under plain x86-64 (no FMA) also within 1 ulp, other
bits. tests/compiler/codegen/test_c_vector_functions.py repeats a sampled sweep.
Through them (the frontend's formulas, 2^18 samples each): sigmoid and SiLU within 2
ulp; GELU (both forms), softplus and mish within 2-3 ulp where x > -0.5 (GELU) or
x > 0, and as far off as their float32 formulas' cancellation takes them below that
(1 + erf(x) for x < -1, log(1 + exp(x)) for x < 0: the same formulas as before).
"""

from __future__ import annotations

from compiler.codegen.c.vector_math import (
    any_lane,
    exp_definitions,
    exp_function,
    float_vector,
    unsigned_vector,
)

VECTOR_FUNCTIONS = ("exp", "tanh", "erf", "log")  # TE ops with a vector rendering

_TANH = ("-0x1.75e62ap-8f", "0x1.522790p-6f", "-0x1.b83c7ep-5f", "0x1.110728p-3f", "-0x1.555532p-2f")
_ERF_SMALL = ("-0x1.453d7ap-11f", "0x1.49ca9ep-8f", "-0x1.b6f3a4p-6f", "0x1.ce2120p-4f", "-0x1.81270cp-2f",
              "0x1.06eba6p-3f")
_ERFC_SCALED = ("0x1.311c08p-13f", "-0x1.7cd260p-10f", "0x1.ba57fep-8f", "-0x1.4fe6d6p-6f", "0x1.8f2206p-5f",
                "-0x1.9c334cp-4f", "0x1.80dd9cp-3f", "-0x1.43698ep-2f", "0x1.db747ep-2f")
_LOG1P = ("-0x1.38b0fep-4f", "0x1.055868p-3f", "-0x1.0d84b0p-3f", "0x1.22da7ep-3f", "-0x1.54725cp-3f",
          "0x1.99a004p-3f", "-0x1.000226p-2f", "0x1.555554p-2f")


def vector_function(op: str, lanes: int) -> str:
    """Name of TE op `op` (one of VECTOR_FUNCTIONS) on float32 `lanes`-lane vectors, as
    `vector_definitions` defines it."""
    return exp_function(lanes) if op == "exp" else f"tf_{op}_f32x{lanes}"


def vector_definitions(op: str, lanes: int) -> dict[str, list[str]]:
    """File-scope C defining `vector_function(op, lanes)`: name -> lines, in dependency order."""
    if op == "exp":
        return exp_definitions(lanes)
    v, m = f"tf_f32x{lanes}", f"tf_i32x{lanes}"
    common = {**any_lane(lanes), **float_vector(lanes), **unsigned_vector(lanes)}
    body = {"tanh": _tanh, "erf": _erf, "log": _log}[op](lanes, v, m)
    exp = exp_definitions(lanes, portable=True) if op != "log" else {}
    name = vector_function(op, lanes)
    return {**common, **exp, name: [f"static inline {v} {name}({v} x) {{", *body, "}"]}


def _horner(var: str, coefficients: tuple[str, ...]) -> str:
    """The C expression of the polynomial with `coefficients` (highest degree first) at `var`."""
    out = coefficients[0]
    for c in coefficients[1:]:
        out = f"({out}) * {var} + {c}"
    return out


def _select(m: str, mask: str, a: str, b: str) -> str:
    """`a` where `mask`, else `b` (float vectors)."""
    return f"({mask} & ({m})({a})) | (~{mask} & ({m})({b}))"


def _odd(m: str, v: str, clamp: str, threshold: str, near: list[str], far: list[str]) -> list[str]:
    """The body of an odd function: on a = min(|x|, clamp) (NaN kept), the statements `near`
    (a < threshold) and `far` (elsewhere) each define their value (`near`, `far`), and the
    one chosen takes x's sign (so -0 gives -0)."""
    return [f"  const {m} sign = ({m})x & (-0x7fffffff - 1);",
            f"  {v} a = ({v})(({m})x & 0x7fffffff);",
            f"  const {m} over = a > {clamp};",
            f"  a = ({v})({_select(m, 'over', f'({v}){{0}} + {clamp}', 'a')});",
            f"  const {v} z = a * a;",
            *near, *far,
            f"  const {m} close = a < {threshold};",
            f"  return ({v})(({_select(m, 'close', 'near', 'far')}) | sign);"]


def _tanh(lanes: int, v: str, m: str) -> list[str]:
    return _odd(m, v, "10.0f", "0.625f",
                [f"  const {v} near = a + a * z * ({_horner('z', _TANH)});"],
                [f"  const {v} e = {exp_function(lanes, portable=True)}(a + a);",
                 f"  const {v} far = 1.0f - 2.0f / (e + 1.0f);"])


def _erf(lanes: int, v: str, m: str) -> list[str]:
    return _odd(m, v, "3.92f", "0.875f",
                [f"  const {v} near = a + a * ({_horner('z', _ERF_SMALL)});"],
                [f"  const {v} e = {exp_function(lanes, portable=True)}(-z);",
                 f"  const {v} t = a - 0.875f;",
                 f"  const {v} far = 1.0f - e * ({_horner('t', _ERFC_SCALED)});"])


def _log(lanes: int, v: str, m: str) -> list[str]:
    u = f"tf_u32x{lanes}"
    return [
        # denormals scaled into the normals: 2^23 x, and 23 off the exponent
        f"  const {m} tiny = x < 0x1p-126f;",
        f"  const {v} s = ({v})({_select(m, 'tiny', 'x * 0x1p23f', 'x')});",
        # e such that s / 2^e is in [sqrt(1/2), sqrt(2)): from the bits above sqrt(1/2)'s
        f"  const {m} d = ({m})s - 0x3f3504f3;",
        f"  const {m} k = (d >> 23);",
        f"  const {v} f = ({v})(({u})s - ({u})(k << 23)) - 1.0f;",
        f"  const {v} e = __builtin_convertvector(k - (tiny & 23), {v});",
        f"  const {v} f2 = f * f;",
        f"  const {v} r = f - 0.5f * f2 + f2 * f * ({_horner('f', _LOG1P)});",
        f"  const {v} y = e * 0.693359375f + (r + e * -2.12194440e-4f);",
        # 0 -> -inf, inf -> inf, below 0 or NaN -> NaN
        f"  const {m} normal = (x > 0.0f) & (x < INFINITY);",
        f"  const {m} zero = x == 0.0f;",
        f"  const {v} special = ({v})({_select(m, 'zero', f'({v}){{0}} - INFINITY', f'({v}){{0}} + NAN')});",
        f"  const {m} inf = x == INFINITY;",
        f"  const {v} edge = ({v})({_select(m, 'inf', 'x', 'special')});",
        f"  return ({v})({_select(m, 'normal', 'y', 'edge')});"]
