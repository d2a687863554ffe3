"""The generated C's float16 conversions (cexpr's tf_h2f / tf_f2h) against numpy's, bit for bit.

Half values live in memory as bits and meet arithmetic only through these helpers, so
their exactness is what makes every fp16 kernel round like numpy on every host.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from compiler.build.gcc import c_flags, compile_objects, link_shared
from compiler.codegen.cexpr import PRELUDE, stored_literal

_WRAPPERS = """
void widen(const uint16_t* in, float* out, long n) { for (long i = 0; i < n; ++i) out[i] = tf_h2f(in[i]); }
void narrow(const float* in, uint16_t* out, long n) { for (long i = 0; i < n; ++i) out[i] = tf_f2h(in[i]); }
"""


@pytest.fixture(scope="module")
def half_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    flags = c_flags()
    objects = compile_objects({"half": PRELUDE + _WRAPPERS}, flags)
    path = Path(tmp_path_factory.mktemp("half")) / "half.so"
    path.write_bytes(link_shared(list(objects.values()), {}, flags))
    lib = ctypes.CDLL(str(path))
    for fn in (lib.widen, lib.narrow):
        fn.restype, fn.argtypes = None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    return lib


def _narrow(lib: ctypes.CDLL, values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values, np.float32)
    out = np.empty(values.shape, np.uint16)
    lib.narrow(values.ctypes.data, out.ctypes.data, values.size)
    return out


def test_every_half_widens_exactly(half_lib: ctypes.CDLL) -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty(bits.shape, np.float32)
    half_lib.widen(bits.ctypes.data, out.ctypes.data, bits.size)
    expected = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(out), nan)
    assert np.array_equal(out[~nan].view(np.uint32), expected[~nan].view(np.uint32))  # signed zeros too


def test_narrowing_rounds_to_nearest_even_like_numpy(half_lib: ctypes.CDLL) -> None:
    finite = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = finite[np.isfinite(finite)].astype(np.float32)
    ordered = np.unique(finite.astype(np.float64))
    ties = ((ordered[1:] + ordered[:-1]) / 2).astype(np.float32)  # exact in float32: every tie
    step = np.float32(np.inf)
    near = np.concatenate([np.nextafter(ties, -step), np.nextafter(ties, step)])
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    edges = np.array([65504, 65519.996, 65520, 1e6, np.inf, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25,
                      2.0 ** -25 * 1.0000001, 1e-30, 0.0], np.float32)
    values = np.concatenate([finite, ties, near, random_bits.view(np.float32), edges, -edges])
    got = _narrow(half_lib, values)
    with np.errstate(over="ignore"):  # the overflow to inf is what is compared
        expected = values.astype(np.float16)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got.view(np.float16)), nan)
    assert np.array_equal(got[~nan], expected[~nan].view(np.uint16))


def test_nan_stays_nan_and_is_quiet(half_lib: ctypes.CDLL) -> None:
    signalling = np.array([0x7F800001, 0xFF800001, 0x7FC00000], np.uint32).view(np.float32)
    got = _narrow(half_lib, signalling)
    assert np.all(np.isnan(got.view(np.float16)))
    assert np.all(got & 0x0200)  # the quiet bit


def test_stored_literals_are_the_half_bit_patterns() -> None:
    assert stored_literal(float("-inf"), "float16") == "((uint16_t)0xfc00)"
    assert stored_literal(1.0, "float16") == "((uint16_t)0x3c00)"
    assert stored_literal(2.5, "float32") == "0x1.4000000000000p+1f"
