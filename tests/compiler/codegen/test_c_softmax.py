"""The row softmax kernel (c/softmax.py): which groups take it, and that it agrees with the
TE interpreter on every row length (whole vectors, vector tails, rows shorter than a
vector), on NaN / inf rows, and that its exp for x <= 0 is within 1 ulp of exp."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary, render_planned
from onnx import helper

from compiler.codegen.c.vector_math import exp_function
from compiler.ir.interp import evaluate
from compiler.schedule.row_softmax import is_row_softmax
from compiler.target.cpu import detect_cpu
from tests.compiler.codegen.test_c_rows import group, layer_norm, rows_tile, softmax

RNG = np.random.default_rng(5)

CASES = {
    "vector_tail": (softmax([7, 67]), 3),     # 4 double vectors, then 3 scalars
    "single_vector_step": (softmax([4, 40]), 4),  # 2 double vectors, one single
    "shorter_than_a_vector": (softmax([5, 3]), 2),
    "three_axes": (softmax([2, 3, 200]), 4),
    "wide_rows": (softmax([3, 4096]), 1),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    kernels = {name: (c, rows_tile(c, len(c.shape) - 1, block)) for name, (c, block) in CASES.items()}
    return KernelLibrary(kernels, Path(tmp_path_factory.mktemp("softmax")))


@pytest.mark.parametrize("name", list(CASES))
def test_row_softmax_matches_interpreter(library: KernelLibrary, name: str) -> None:
    c = CASES[name][0]
    x = (RNG.standard_normal(c.shape) * 4).astype(np.float32)
    np.testing.assert_allclose(library.run(name, [x]), evaluate(c, [x]), rtol=1e-5, atol=1e-7)


def test_nan_and_infinite_rows_give_what_the_interpreter_gives(library: KernelLibrary) -> None:
    c = CASES["single_vector_step"][0]  # 4 rows of 40
    x = RNG.standard_normal(c.shape).astype(np.float32)
    x[0, 17] = np.nan                  # NaN anywhere: the whole row is NaN
    x[1, ::3] = -np.inf                # masked entries: exactly 0, the rest still sums to 1
    x[2, :] = -np.inf                  # nothing left: NaN (exp(-inf - -inf))
    x[3, :] = np.linspace(-1e4, 1e4, 40)  # exp underflows to 0 through the wide path
    got, want = library.run("single_vector_step", [x]), evaluate(c, [x])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert np.isnan(got[0]).all() and np.isnan(got[2]).all()
    assert (got[1, ::3] == 0).all() and abs(got[1].sum() - 1) < 1e-6


def test_exp_of_nonpositive_arguments_is_within_one_ulp(library: KernelLibrary) -> None:
    # A row holding 0 and values <= -25 sums to exactly 1 in float32, so its outputs are
    # the kernel's exp itself: swept down through the fast path's edge (-86.5) and the
    # denormals to 0, on whole vectors and on the scalar tail.
    c = CASES["wide_rows"][0]
    x = np.linspace(-110, -25, c.shape[0] * c.shape[1], dtype=np.float32).reshape(c.shape)
    x[:, 0] = 0.0
    got = library.run("wide_rows", [x])
    want = np.exp(x.astype(np.float64)).astype(np.float32)  # rounded once
    ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    assert ulps.max() <= 1


def test_last_axis_float32_softmax_takes_the_row_kernel() -> None:
    c = softmax([7, 67])
    src = render_planned(c, rows_tile(c, 1, 3), "k")
    assert is_row_softmax(c) and "k_row(" in src and exp_function(detect_cpu().lanes, nonpositive=True) in src
    assert "k_m0_" not in src  # no row-group members


@pytest.mark.parametrize("c", [softmax([3, 6, 5], axis=1), layer_norm([3, 10, 24]),
                               group([helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)], [("x", [4, 64])])],
                         ids=["middle_axis", "layer_norm", "log_softmax"])
def test_other_groups_keep_the_row_group_members(c) -> None:
    assert not is_row_softmax(c)
