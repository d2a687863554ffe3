"""Times single CPU kernels on the machine that compiles them: Roller's top-k measurement,
and the per-kernel times of `tileforge profile`.

The kernels are in one shared library (a kernel's candidates, or a whole model's
model.so); each is called on random buffers of its own, after a warm-up call,
until a small time budget is spent, all of one request in rounds (one call of each
per round, a kernel's candidates in an order that turns every round: `round_order`);
the median is its measured time.
"""

from __future__ import annotations

import ctypes
import functools
import statistics
import tempfile
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.aligned import aligned_empty
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute

_MIN_RUNS = 3
_MAX_RUNS = 50
# Per candidate, after warm-up. 0.05 s took ResNet-50's ~250 candidates 12-13 s of a 64 s cold
# compile; at 0.02 (a 1 ms kernel still runs about 20 times, in rounds with its rivals) two
# compiles each took 63.5 / 64.3 -> 58.2 / 56.7 s and ran 0.92x / 0.91x -> 0.93x / 0.94x
# onnxruntime, MobileNetV2's 0.87x / 0.89x -> 0.88x / 0.87x (Zen 2, two threads, the four
# artifacts of each benched alternating in one process).
_BUDGET_S = 0.02
# After _MIN_RUNS rounds a candidate whose fastest run is this much slower than the median of
# the fastest candidate of its kernel is out of the race: its rounds, and its share of the
# budget, are spent no more (ResNet-50's 179 distinct candidates: 53 timed 1.2x their
# kernel's fastest or slower, 28% of the time the timer spent).
_RACE = 1.25
_BATCH_BYTES = 256 << 20  # buffers alive at once: calls beyond are timed in a later batch
_NOISE_VALUES = 1 << 20


@dataclass(frozen=True)
class KernelCall:
    """One symbol to time: the Compute it computes, and `packed` (input position -> bytes)
    for the inputs it reads packed at load."""

    symbol: str
    compute: Compute
    packed: Mapping[int, int] = field(default_factory=dict)


@functools.cache
def _noise() -> np.ndarray:
    """Standard normal float32 values, drawn once a process, that `_buffers` repeats."""
    return np.random.default_rng(0).standard_normal(_NOISE_VALUES, dtype=np.float32)


def _buffers(compute: Compute, packed: Mapping[int, int]) -> list[np.ndarray]:
    """Output then inputs, random but in range for index-like integer inputs; an input
    read packed gets the packed layout's `packed[position]` bytes (float32). The random
    values are `_noise` over and over: drawn afresh for each kernel, they took ResNet-50's
    cold compile 0.9 s."""
    out = [aligned_empty(compute.shape, dtype(compute.dtype).np_type)]
    for pos, t in enumerate(compute.inputs):
        shape = (packed[pos] // 4,) if pos in packed else t.shape
        a = aligned_empty(shape, dtype(t.dtype).np_type)
        if dtype(t.dtype).is_float:
            flat, noise = a.reshape(-1), _noise()
            for start in range(0, flat.size, noise.size):
                part = flat[start:start + noise.size]
                part[...] = noise[:part.size]
        else:
            a[...] = 0  # integer inputs of a kernel may be indices: 0 is always in range
        out.append(a)
    return out


def time_kernels(library: bytes, calls: Sequence[KernelCall],
                 threads: int | None = None, evict_bytes: int = 0) -> dict[str, float]:
    """Median microseconds per call of each of `calls` (symbols of `library`), each on
    random buffers shaped for its own Compute.

    `evict_bytes`: as many bytes written between timed calls (untimed), so that each call
    starts as inside a model run, its inputs and weights gone from L2 (`tileforge
    profile`: timed hot, a MobileNetV2's kernels summed to 70% of its run, with L2
    emptied to 100%). The top-k compares candidates hot: emptying L2 changed no choice."""
    with tempfile.TemporaryDirectory(prefix="tileforge-timer-") as d:
        path = Path(d) / "kernels.so"
        path.write_bytes(library)
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    if threads is not None:
        _set_omp_threads(threads)
    result: dict[str, float] = {}
    evict = np.zeros(evict_bytes // 4, np.float32)
    for batch in _batches(calls):
        # Calls of one Compute take the same buffers: drawn once (a 94 MB embedding table
        # took 0.15 s to fill per candidate).
        arrays: dict[tuple[int, tuple[tuple[int, int], ...]], list[np.ndarray]] = {}  # alive while timed
        fns = []
        for call in batch:
            key = _buffer_key(call)
            if key not in arrays:
                arrays[key] = _buffers(call.compute, call.packed)
            ptrs = [ctypes.c_void_p(b.ctypes.data) for b in arrays[key]]
            fn = getattr(lib, call.symbol)
            fn.restype = None
            fn(*ptrs)  # warm-up: page faults, OpenMP thread start
            fns.append((fn, ptrs))
        # In rounds, one call of each per round, so that a slow spell of a shared host slows
        # them all alike: timed one after another, a candidate that met one ran 1.5x its
        # time and lost to a slower one (a 3x3 convolution on a 2-core cloud VM: 933 and
        # 1151 us for the same kernel in two compilations), and a fused group timed apart
        # from its parts was split back by the spell alone.
        #
        # A call whose buffers differ from the call's before it is made once untimed first:
        # in a run a kernel finds the input its producer just wrote, and its weights, as far
        # as the caches hold them. Timed straight after another kernel's call, it found them
        # gone: a MobileNetV2 block's three kernels, timed beside their fused chain, summed
        # to 628 us, where each timed with its own candidates took 330 and the three ran
        # in 312 in the model's run (Zen 5), and the chain, 405 us, was kept.
        #
        # Calls on the same buffers (a kernel's candidates) follow each other in an order that
        # turns every round: the first of them after another kernel's calls ran slowest and
        # each next one faster, rewarmed or not, the code being the same (five copies of one
        # 1x1 convolution, Zen 4, two threads: 489, 371, 347, 340, 333 us), so a fixed order
        # handed the model's first candidate a handicap.
        keys = [_buffer_key(call) for call in batch]
        times: list[list[float]] = [[] for _ in batch]
        racing = list(range(len(batch)))  # the calls still timed
        start, rounds = time.perf_counter(), 0
        while rounds < _MAX_RUNS and (rounds < _MIN_RUNS or time.perf_counter() - start < _BUDGET_S * len(racing)):
            for j, rewarm in round_order([keys[i] for i in racing], rounds):
                fn, ptrs = fns[racing[j]]
                if evict.size:
                    evict += 1.0
                elif rewarm:
                    fn(*ptrs)
                t0 = time.perf_counter()
                fn(*ptrs)
                times[racing[j]].append(time.perf_counter() - t0)
            rounds += 1
            if rounds >= _MIN_RUNS:
                racing = still_racing(racing, keys, times)
        for call, runs in zip(batch, times, strict=True):
            result[call.symbol] = statistics.median(runs) * 1e6
        del arrays
    return result


def still_racing(racing: Sequence[int], keys: Sequence[Hashable], times: Sequence[Sequence[float]]) -> list[int]:
    """The calls of `racing` (indices into `keys` and `times`) left in the race: all but
    those whose fastest run is over _RACE times the median of the fastest call on the same
    buffers (a kernel's candidates; a call alone on its buffers always stays)."""
    leader: dict[Hashable, float] = {}
    for i in racing:
        median = statistics.median(times[i])
        leader[keys[i]] = min(leader.get(keys[i], median), median)
    return [i for i in racing if min(times[i]) <= _RACE * leader[keys[i]]]


def round_order(keys: Sequence[Hashable], round_index: int) -> list[tuple[int, bool]]:
    """The calls of round `round_index` of `time_kernels`: (index into `keys`, whether it is
    made once untimed first). Runs of equal keys (calls on the same buffers: a kernel's
    candidates) keep their place, each run turned by one call a round, so that every call
    of a run is its first equally often; the first of a run is rewarmed where other runs'
    calls come between."""
    runs: list[list[int]] = []
    for i, key in enumerate(keys):
        if runs and keys[runs[-1][0]] == key:
            runs[-1].append(i)
        else:
            runs.append([i])
    return [(run[(round_index + pos) % len(run)], pos == 0 and len(runs) > 1)
            for run in runs for pos in range(len(run))]


def _buffer_key(call: KernelCall) -> tuple[int, tuple[tuple[int, int], ...]]:
    return id(call.compute), tuple(sorted(call.packed.items()))


def _buffer_bytes(call: KernelCall) -> int:
    c = call.compute
    return c.nbytes + sum(call.packed.get(p, t.nbytes) for p, t in enumerate(c.inputs))


def _batches(calls: Sequence[KernelCall]) -> list[list[KernelCall]]:
    """`calls` in order, cut where the buffers of a batch's Computes would pass
    `_BATCH_BYTES` (all of a batch's buffers are alive while its rounds run)."""
    batches: list[list[KernelCall]] = [[]]
    sizes: dict[tuple[int, tuple[tuple[int, int], ...]], int] = {}
    for call in calls:
        key = _buffer_key(call)
        if key not in sizes:
            size = _buffer_bytes(call)
            if batches[-1] and sum(sizes.values()) + size > _BATCH_BYTES:
                batches.append([])
                sizes = {}
            sizes[key] = size
        batches[-1].append(call)
    return [b for b in batches if b]


def _set_omp_threads(n: int) -> None:
    """Set the OpenMP thread count of this process (libgomp is shared by all loaded kernels)."""
    try:
        gomp = ctypes.CDLL("libgomp.so.1")
    except OSError:
        return
    gomp.omp_set_num_threads(ctypes.c_int(n))
