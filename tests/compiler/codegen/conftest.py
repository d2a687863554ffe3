"""Fixtures of the C kernels' tests."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pytest


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """OpenMP threads of the regions the calling thread opens, restored after."""
    gomp = ctypes.CDLL("libgomp.so.1")
    before = gomp.omp_get_max_threads()
    gomp.omp_set_num_threads(request.param)
    yield request.param
    gomp.omp_set_num_threads(before)
