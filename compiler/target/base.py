"""The hardware description every scheduling decision reads."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Literal


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy, outermost (DRAM) first in `Target.levels`.

    `capacity` is bytes per unit (per SM / per core; the whole device for DRAM),
    `bandwidth` bytes/s summed over the device, `transaction` the smallest
    granule moved (cache line / memory transaction). `shared` marks a level whose
    capacity is for the whole device rather than per unit (DRAM, GPU L2, CPU L3).
    """

    name: str
    capacity: int
    bandwidth: float
    transaction: int
    shared: bool = False


@dataclass(frozen=True)
class Target:
    """A compilation target: a GPU model or this machine's CPU.

    `lanes` is the lockstep width (warp of 32, or fp32 SIMD lanes); `units` the
    parallel units (SMs or cores). `extras` holds kind-specific numbers
    (e.g. `max_threads_per_block`, `smem_per_block`, `compute_capability`).
    """

    name: str
    kind: Literal["cpu", "cuda"]
    arch: str
    levels: tuple[MemoryLevel, ...]
    units: int
    lanes: int
    banks: int
    registers: int
    peak_flops: dict[str, float]
    features: tuple[str, ...] = ()
    toolchain: str = ""
    extras: dict[str, int | float | str] = field(default_factory=dict)

    def level(self, name: str) -> MemoryLevel:
        """The memory level called `name` (KeyError names it)."""
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise KeyError(f"target {self.name} has no memory level {name!r}")

    def with_units(self, n: int) -> Target:
        """This target limited to `n` of its units (n < units; e.g. a CPU run on n threads):
        the peak and the bandwidth of every per-unit level scale by n / units, a shared
        level's stay whole (one core can still draw on all of L3 and DRAM)."""
        if not 0 < n < self.units:
            return self
        f = n / self.units
        levels = tuple(lv if lv.shared else replace(lv, bandwidth=lv.bandwidth * f) for lv in self.levels)
        return replace(self, units=n, levels=levels, peak_flops={k: v * f for k, v in self.peak_flops.items()})

    def fingerprint(self) -> str:
        """What generated code depends on: arch, ISA features and toolchain version.

        Two machines with the same fingerprint can share compiled kernels.
        """
        ident = {"kind": self.kind, "arch": self.arch, "features": sorted(self.features),
                 "toolchain": self.toolchain}
        if "isa" in self.extras:  # a named CPU model: its gcc flags, not the host's
            ident["isa"] = self.extras["isa"]
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
        return f"{self.kind}:{self.arch}:{digest}"

    def describe(self) -> dict:
        """A JSON-able description (for `tileforge targets` and the API)."""
        d = asdict(self)
        d["fingerprint"] = self.fingerprint()
        return d
