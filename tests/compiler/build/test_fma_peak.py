"""The FMA peak probe (compiler/build/fma_peak.py) and its place in the stored measurements."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from compiler.build.fma_peak import _source, fma_peak
from compiler.build.gcc import c_flags, compile_objects
from compiler.target.measure import measure_cpu


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_the_probe_builds_at_every_vector_width(lanes: int) -> None:
    (obj,) = compile_objects({"fma": _source(lanes)}, c_flags()).values()
    assert obj[:4] == b"\x7fELF"


def test_the_probe_measures_a_rate_on_one_thread_and_on_all() -> None:
    one, every = fma_peak()
    assert math.isfinite(one) and math.isfinite(every) and one > 1e8 and every > 1e8


def test_the_stored_peak_is_the_higher_of_the_blas_and_the_fma_rates(tmp_path: Path) -> None:
    fast = measure_cpu(tmp_path, copy_bytes=8 << 20, matmul_n=128, repeats=2, fma_peak=(1e15, 2e15))
    assert (fast["flops_1thread"], fast["flops_all_threads"]) == (1e15, 2e15)
    slow = measure_cpu(tmp_path, copy_bytes=8 << 20, matmul_n=128, repeats=2, fma_peak=(1.0, 1.0))
    assert slow["flops_1thread"] == slow["matmul_1thread"] and slow["flops_all_threads"] == slow["matmul_all_threads"]
