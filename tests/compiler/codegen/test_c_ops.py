"""Every TE op rendered in C means what the interpreter says, on edge values
(NaN, infinities, signed zeros, halves, zero and -1 divisors, extreme integers,
shifts past the width). One kernel per dtype: out[k, i] = op_k(a[i], b[i])."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary

from compiler.ir import te
from compiler.ir.interp import evaluate
from compiler.ir.te import Axis, Compute, Expr, Load, TensorType, Var, call, cast, select
from compiler.schedule.plan import TileConfig

UNARY_FLOAT = ["neg", "abs", "exp", "log", "sqrt", "tanh", "erf", "sin", "cos", "tan", "asin",
               "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round",
               "sign", "reciprocal", "isnan", "isinf", "not"]
BINARY_FLOAT = ["add", "sub", "mul", "div", "min", "max", "pow", "mod", "fmod", "floordiv",
                "floormod", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor"]
UNARY_INT = ["neg", "abs", "sign", "floor", "ceil", "round", "isnan", "isinf", "not", "bitnot"]
BINARY_INT = ["add", "sub", "mul", "div", "min", "max", "mod", "fmod", "floordiv", "floormod",
              "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "bitand", "bitor", "bitxor",
              "shl", "shr", "pow"]
UNARY_BOOL = ["not", "bitnot", "abs"]
BINARY_BOOL = ["add", "mul", "min", "max", "eq", "ne", "lt", "ge", "and", "or", "xor",
               "bitand", "bitor", "bitxor"]
FLOAT16 = ["neg", "abs", "exp", "tanh", "sqrt", "floor", "round", "add", "sub", "mul", "div",
           "min", "max", "lt", "eq"]

OPS_BY_DTYPE: dict[str, list[str]] = {
    "float32": UNARY_FLOAT + BINARY_FLOAT,
    "float64": UNARY_FLOAT + BINARY_FLOAT,
    "float16": FLOAT16,
    "int64": UNARY_INT + BINARY_INT,
    "int32": UNARY_INT + BINARY_INT,
    "int8": UNARY_INT + BINARY_INT,
    "uint8": [op for op in UNARY_INT + BINARY_INT if op not in {"neg", "sign"}],
    # round goes through float64, whose conversion back is undefined above 2**63
    "uint64": [op for op in UNARY_INT + BINARY_INT if op not in {"neg", "sign", "round"}],
    "bool": UNARY_BOOL + BINARY_BOOL,
}

FLOAT_EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.0,
               -7.25, 1e-3, 0.9, -0.9, 100.0, -3.5, 7.0]


def _edge_inputs(dt: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    np_t = np.dtype(dt)
    if dt == "bool":
        a = np.array([0, 0, 1, 1] * 3, bool)
        return a, np.array([0, 1, 0, 1] * 3, bool)
    if np_t.kind == "f":
        a = np.array(FLOAT_EDGES, np.float64)
        b = np.roll(a, 7)
        b[:3] = [0.0, -0.0, 2.0]
        extra = rng.standard_normal((2, 20)) * 3
        return (np.concatenate([a, extra[0], a]).astype(dt),
                np.concatenate([b, extra[1], a[::-1]]).astype(dt))
    info = np.iinfo(np_t)
    a = [0, 1, -1, 7, -7, 9, -9, 100, -100, info.min, info.max, info.min, 5, 13, -13, 3]
    b = [0, 0, 0, 2, 2, -2, -2, 7, 7, -1, -1, 1, 9, -4, 4, 64]
    a = [int(x) % (info.max + 1) if info.min == 0 else x for x in a]
    b = [int(x) % (info.max + 1) if info.min == 0 else x for x in b]
    a += list(rng.integers(max(info.min, -1000), min(info.max, 1000), 16, endpoint=True))
    b += list(rng.integers(max(info.min, -20), min(info.max, 20), 16, endpoint=True))
    return np.array(a, dtype=dt), np.array(b, dtype=dt)


def _op(op: str, a: Expr, b: Expr, dt: str) -> Expr:
    if te.OPS[op] == 1:
        return call(op, a)
    if op == "pow" and not dt.startswith("float"):
        b = call("bitand", b, 7)  # numpy refuses negative integer powers
    return call(op, a, b)


def op_table(dt: str) -> Compute:
    """out[k, i] = cast(op_k(a[i], b[i]), dt) for every op of `dt`."""
    ops = OPS_BY_DTYPE[dt]
    n = len(_edge_inputs(dt)[0])
    k, i = Var("i0"), Var("i1")
    a, b = Load(0, (i,), dt), Load(1, (i,), dt)
    value: Expr = cast(_op(ops[-1], a, b, dt), dt)
    for j in reversed(range(len(ops) - 1)):
        value = select(call("eq", k, j), cast(_op(ops[j], a, b, dt), dt), value)
    return Compute((Axis("i0", len(ops)), Axis("i1", n)), value,
                   (TensorType((n,), dt), TensorType((n,), dt)), dt)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {f"ops_{dt}": (op_table(dt), TileConfig((1, 16), (1, 8), (), 8)) for dt in OPS_BY_DTYPE}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("cops")))


TOLERANCE = {"float32": 3e-7, "float64": 1e-15, "float16": 1e-3}
FLOAT64_EXACT = 2**53


def _exact_int_div(a: np.ndarray, b: np.ndarray, dt: str) -> np.ndarray:
    """C division (truncating; divisor 0 counts as 1), wrapped to `dt`, in Python integers."""
    out = []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        y = y or 1
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        out.append(q)
    bits = np.dtype(dt).itemsize * 8
    return np.array([q % (1 << bits) for q in out], dtype=f"uint{bits}").view(dt)


def _reference(dt: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The interpreter's values, except integer division beyond 2**53, which the
    interpreter computes through float64 (inexact there): exact truncation instead."""
    want = evaluate(op_table(dt), [a, b])
    ops = OPS_BY_DTYPE[dt]
    if "div" in ops and np.dtype(dt).kind in "iu":
        big = np.abs(a.astype(object)) > FLOAT64_EXACT
        row = ops.index("div")
        want[row] = np.where(big, _exact_int_div(a, b, dt), want[row])
    return want


@pytest.mark.parametrize("dt", list(OPS_BY_DTYPE))
def test_every_op_matches_the_interpreter(library: KernelLibrary, dt: str) -> None:
    a, b = _edge_inputs(dt)
    got = library.run(f"ops_{dt}", [a, b])
    want = _reference(dt, a, b)
    for row, op in enumerate(OPS_BY_DTYPE[dt]):
        if dt in TOLERANCE:
            np.testing.assert_allclose(got[row], want[row], rtol=TOLERANCE[dt], atol=0, equal_nan=True,
                                       err_msg=f"{op} on {dt}, a={a}, b={b}")
            both_zero = (got[row] == 0) & (want[row] == 0)
            assert (np.signbit(got[row]) == np.signbit(want[row]))[both_zero].all(), f"sign of zero: {op}"
        else:
            np.testing.assert_array_equal(got[row], want[row], err_msg=f"{op} on {dt}, a={a}, b={b}")
