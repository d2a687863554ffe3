"""The inlined vector tanh, erf and log (c/vector_functions.py) in real element-wise kernels:
within 1 ulp of the float64 function rounded once, dense samples and special values, at
4, 8 and 16 lanes, with the same bits at every lane count (what an AVX2 and an AVX-512
host's kernels differ in), and their GELU / Mish / Softplus epilogues on the vector path."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary, render_planned

from compiler.codegen.c.vector_functions import vector_function
from compiler.ir.te import Axis, Compute, Load, TensorType, Var, call
from compiler.schedule.plan import TileConfig

LANES = (4, 8, 16)
N = 1 << 17  # values per sweep (plus the special values), a vector tail included
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40, 1.0, -1.0,
                    3.4e38, -3.4e38, 1.17549435e-38], np.float32)
# op -> (float64 reference, sampled range): every magnitude where the result is not yet
# constant (tanh: +-1 beyond 9.1, erf: beyond 3.92), log over all positive exponents
REFERENCE = {
    "tanh": (np.tanh, 10.0),
    "erf": (np.vectorize(math.erf, otypes=[np.float64]), 4.5),
    "log": (np.log, None),
}


def _samples(op: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    bound = REFERENCE[op][1]
    if bound is None:  # log: random bit patterns of positive floats, denormals included
        x = rng.integers(1, 0x7F800000, N, dtype=np.int64).astype(np.uint32).view(np.float32)
    else:  # uniform in value and in magnitude (small arguments take the polynomial branch)
        x = np.concatenate([rng.uniform(-bound, bound, N // 2),
                            np.sign(rng.standard_normal(N // 2)) * 10.0 ** rng.uniform(-40, 1, N // 2)])
    return np.concatenate([x.astype(np.float32), SPECIAL]).reshape(1, -1)


def _unary(op: str, n: int) -> Compute:
    i0, i1 = Var("i0"), Var("i1")
    return Compute((Axis("i0", 1), Axis("i1", n)), call(op, Load(0, (i0, i1), "float32")),
                   (TensorType((1, n), "float32"),), "float32")


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    n = N + len(SPECIAL)
    kernels = {f"{op}{lanes}": (_unary(op, n), TileConfig((1, n), (1, 1), (), lanes))
               for op in REFERENCE for lanes in LANES}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("vector_functions")))


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float32 steps (ordered so that -0 and +0 are neighbours of the denormals)."""
    def ordered(a: np.ndarray) -> np.ndarray:
        i = a.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(got) - ordered(want))


@pytest.mark.parametrize("op", list(REFERENCE))
def test_within_one_ulp_with_the_same_bits_at_every_lane_count(library: KernelLibrary, op: str) -> None:
    x = _samples(op)
    with np.errstate(all="ignore"):
        want = REFERENCE[op][0](x.astype(np.float64)).astype(np.float32)
    outputs = [library.run(f"{op}{lanes}", [x]) for lanes in LANES]
    for lanes, got in zip(LANES, outputs, strict=True):
        assert vector_function(op, lanes) in library.sources[f"{op}{lanes}"]
        assert np.array_equal(got.view(np.int32), outputs[0].view(np.int32)), lanes
    got = outputs[0]
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert _ulps(got[~nan], want[~nan]).max() <= 1
    zero = (x == 0) & (op != "log")
    assert np.array_equal(np.signbit(got[zero]), np.signbit(x[zero]))  # tanh(-0) = erf(-0) = -0


@pytest.mark.parametrize(("ops", "body"), [
    (("erf",), lambda x: 0.5 * x * (1.0 + call("erf", x * 0.7071067811865476))),  # GELU
    (("tanh",), lambda x: 0.5 * x * (1.0 + call("tanh", 0.7978845608 * (x + 0.044715 * x * x * x)))),
    (("tanh", "log", "exp"), lambda x: x * call("tanh", call("log", call("exp", x) + 1.0))),  # Mish
])
def test_activations_call_the_vector_functions(ops: tuple[str, ...], body) -> None:
    i0, i1 = Var("i0"), Var("i1")
    c = Compute((Axis("i0", 4), Axis("i1", 256)), body(Load(0, (i0, i1), "float32")),
                (TensorType((4, 256), "float32"),), "float32")
    src = render_planned(c, TileConfig((4, 256), (1, 1), (), 8), "k")
    for op in ops:
        assert f"= {vector_function(op, 8)}(" in src  # called in the kernel's vector loop
