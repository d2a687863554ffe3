"""Mapping data values to pixels, and picking round tick values."""

from __future__ import annotations

import math
from dataclasses import dataclass


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(value, 12))
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """Values 1, 2, 5 times powers of ten covering [lo, hi] (both > 0), from the last one at
    or below `lo` to the first one at or above `hi`; powers of ten alone when that spans decades."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1.0,) if last - first > 2 else (1.0, 2.0, 5.0)
    candidates = [m * 10.0 ** e for e in range(first, last + 1) for m in steps]
    below = [v for v in candidates if v <= lo * (1 + 1e-9)]
    above = [v for v in candidates if v >= hi * (1 - 1e-9)]
    start, end = below[-1], above[0]
    if start == end:
        bigger = [v for v in candidates if v > end]
        end = bigger[0] if bigger else end * 10
    return [v for v in candidates if start <= v <= end] + ([end] if end not in candidates else [])


@dataclass(frozen=True)
class LinearScale:
    """Maps the domain [lo, hi] linearly onto the pixel range [start, end]."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        if self.hi == self.lo:
            return (self.start + self.end) / 2
        return self.start + (value - self.lo) / (self.hi - self.lo) * (self.end - self.start)


@dataclass(frozen=True)
class LogScale:
    """Maps the domain [lo, hi] (both > 0) logarithmically onto [start, end]."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        linear = LinearScale(math.log10(self.lo), math.log10(self.hi), self.start, self.end)
        return linear(math.log10(max(value, self.lo)))
