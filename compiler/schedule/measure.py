"""Roller's top-k, measured: the cost model ranks a kernel's tilings in microseconds; where
the device is present, the best few are built and timed there and the fastest is kept.

The scheduler decides what is worth timing and which candidate wins; the backend supplies
the timing function (gcc and ctypes on a CPU, nvcc and CUDA events on a GPU,
compiler/backends/).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from compiler.schedule.plan import Kernel, TileConfig
from compiler.schedule.rtile import Candidate


@dataclass(frozen=True)
class Timing:
    """One kernel's candidate tilings to time on the device."""

    key: str
    kernel: Kernel
    tiles: Sequence[TileConfig]

    def symbols(self) -> list[str]:
        """Generated names of the candidates (never a model's string)."""
        return [f"tf_cand_{self.key[:16]}_{i}" for i in range(len(self.tiles))]


TimeFn = Callable[[Sequence[Timing]], Mapping[str, Sequence[float]]]


def measure_top_k(candidates: Mapping[str, Sequence[Candidate]], kernels: Mapping[str, Kernel],
                  threshold_us: float, time: TimeFn) -> dict[str, list[float]]:
    """Microseconds of each candidate of every kernel worth timing (more than one candidate,
    and one predicted at `threshold_us` or more: below it, measurement noise and the extra
    toolchain run cost more than any difference found), by cache key."""
    timings = [Timing(key, kernels[key], [c.tile for c in cands]) for key, cands in candidates.items()
               if len(cands) > 1 and max(c.estimate.time_us for c in cands) >= threshold_us]
    if not timings:
        return {}
    return {key: [round(t, 3) for t in times] for key, times in time(timings).items()}


# Candidates timed within this share of the fastest are a tie, which the model's order breaks
# (`fastest`): timed hot, on warm caches, a 1 x 1 stride-2 convolution read in place (its
# copy holding both column phases, half its multiply-adds on positions nobody stores) tied
# with its patches gathered (49.7 against 50.1 us) and won; in the model's run it took 115 us,
# where the gathered one takes 29 (a 128-px bottleneck ResNet, two threads, Zen 4).
TIE = 0.02


def fastest(times: Sequence[float | None] | None) -> int:
    """The index of the fastest measured candidate: the model's first among those timed
    within TIE of the fastest (0, the model's first, when none was timed)."""
    timed = [t for t in times or () if t is not None]
    if not timed:
        return 0
    best = min(timed)
    return next(i for i, t in enumerate(times or ()) if t is not None and t <= best * (1 + TIE))
