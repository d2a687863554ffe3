"""Output buffers of a CPU run, recycled once the caller has let go of them.

Every run hands back fresh arrays, but allocating them cost more than the run
around a small kernel: a 393 KB softmax output came from new, cache-cold memory
each time (a 128x768 softmax on a Zen 5 core: 18.1 us a run with a fresh output,
16.9 us with a reused one). An arena gives warm memory back; this does the same
without ever letting a run write into an array the caller can still see: the
buffer of the last run's output is taken again only when no Python object refers
to it but this pool. Every array on that memory (the one returned, and any view,
slice or reshape of it) holds a reference to the buffer that owns the memory, as
does a memoryview or ctypes object exported from them, so a reference count of
ours alone proves that nothing outside can read or write it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from compiler.aligned import aligned_buffer
from compiler.runtime.executable import TensorSpec


class OutputBuffers:
    """Aligned (array, address) pairs for one run's outputs, reusing a previous run's
    arrays that nobody else holds. Not thread-safe: callers serialize `take` (a CPU
    executable calls it under its run lock)."""

    def __init__(self, specs: Sequence[TensorSpec]) -> None:
        self._specs = list(specs)
        self._last: list[tuple[np.ndarray, int] | None] = [None] * len(self._specs)

    def take(self) -> list[tuple[np.ndarray, int]]:
        """One (array, data address) per output spec, each free for the run to write."""
        taken = []
        for i, spec in enumerate(self._specs):
            last = self._last[i]
            if last is None or not _only_ours(last[0]):
                last = aligned_buffer(spec.shape, spec.np_dtype)
                self._last[i] = last
            taken.append(last)
        return taken


def _only_ours(array: np.ndarray) -> bool:
    """Whether this pool's entry holds the only reference to `array` and to the buffer
    it views. getrefcount counts its own argument: the array is referenced by the
    pool's tuple and that argument; its base, by the array and the argument, plus
    every other view of the same memory."""
    return sys.getrefcount(array) == 3 and sys.getrefcount(array.base) == 2
