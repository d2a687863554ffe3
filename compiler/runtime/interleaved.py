"""Wall-clock times of several callables taken in alternating phases, so that a change in
the machine's load lands on all of them alike: the bench's runtimes against each other,
a profile's model runs, and the compiler's choice between two lowerings of one op
(compiler/pipeline.py `choose`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence


def time_interleaved(fns: Sequence[Callable[[], object]], min_runs: int = 20, min_seconds: float = 1.0,
                     phase_seconds: float = 0.1, settle_seconds: float = 0.01, warmup: int = 2,
                     max_runs: int = 5000) -> list[list[float]]:
    """Wall-clock seconds of repeated calls of each of `fns` (after warm-up), taken in
    alternating phases of about `phase_seconds` so that a change in the machine's load
    (another process, a frequency step) lands on all of them alike: at least
    `min_runs` calls each and `min_seconds` in all. Before each phase the process
    waits until it is idle (`wait_until_idle`, windows of `settle_seconds`): a runtime's
    pool threads spin after its last call, and would take the cores from the next
    phase's. `time_phases` gives the same calls phase by phase."""
    return [calls(phases)
            for phases in time_phases(fns, min_runs, min_seconds, phase_seconds, settle_seconds, warmup, max_runs)]


def time_phases(fns: Sequence[Callable[[], object]], min_runs: int = 20, min_seconds: float = 1.0,
                phase_seconds: float = 0.1, settle_seconds: float = 0.01, warmup: int = 2,
                max_runs: int = 5000) -> list[list[list[float]]]:
    """`time_interleaved`'s calls, for each of `fns` a list per round: round r's phases of
    the callables ran one after another, so that comparing them round by round (`round_ratios`)
    cancels a change of the machine's speed slower than a round."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    phases: list[list[list[float]]] = [[] for _ in fns]
    start, runs = time.perf_counter(), 0
    while runs < max_runs and (runs < min_runs or time.perf_counter() - start < min_seconds):
        for fn, out in zip(fns, phases, strict=True):
            wait_until_idle(settle_seconds)
            phase_end = time.perf_counter() + phase_seconds
            out.append([])
            while True:
                t0 = time.perf_counter()
                fn()
                out[-1].append(time.perf_counter() - t0)
                if t0 >= phase_end:
                    break
        runs += len(phases[0][-1])
    return phases


def calls(phases: Sequence[Sequence[float]]) -> list[float]:
    """One callable's phases (`time_phases`) as its calls in order."""
    return [t for phase in phases for t in phase]


def round_ratios(reference: Sequence[Sequence[float]], timed: Sequence[Sequence[float]]) -> list[float]:
    """Per round (`time_phases`), the median of `reference`'s phase over the median of `timed`'s."""
    return [statistics.median(r) / max(statistics.median(t), 1e-12) for r, t in zip(reference, timed, strict=True)]


def wait_until_idle(window: float, at_most: float = 1.0) -> float:
    """Sleep until no thread of this process used the CPU for a whole `window` (seconds),
    or `at_most` seconds passed; returns the seconds waited. onnxruntime's pool threads
    spin 50-60 ms after each run, libgomp's about 10-20 ms: on 2 cores, a 2-thread run
    started in that time shares a core with the spinning thread. It took the first 4-5
    calls of each of our phases after onnxruntime's twice as long (dilated segmenter, a
    fixed 20 ms pause: 7.4 against 3.3 ms; per-call medians of a 6 s series 5.4 against
    3.4 ms alone)."""
    start = time.perf_counter()
    while window > 0:
        cpu = time.process_time()
        time.sleep(window)
        waited = time.perf_counter() - start
        # under 10% of one core over the window: the sleeping thread's own wake-up, nothing spinning
        if time.process_time() - cpu < 0.1 * window or waited >= at_most:
            return waited
    return 0.0
