"""Cost-checked connections (Welder's rule): a group is kept only where the
micro-performance model predicts it beats the sum of its parts, each part priced
with its own best rTile (Roller's construction, compiler/schedule/rtile.py).

Pricing constructs tiles, so it is spent only where it can matter: parts whose
roofline floor (compulsory DRAM bytes over bandwidth, FLOPs over peak) together
stays under the backend's measuring threshold connect unpriced, as they always did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from compiler.cost.model import Estimate
from compiler.cost.roofline import kernel_work
from compiler.ir.te import Compute
from compiler.schedule.chain_members import chain_prices
from compiler.schedule.partition import is_chain_group
from compiler.schedule.rtile import construct
from compiler.target.base import Target


class Pricer:
    """Predicted times of Computes on one target, each with its own best rTile (memoised
    by the hash of the Compute's canonical form: a model repeats its layers). `known`:
    estimates by that hash from an earlier compile (price_record.py)."""

    def __init__(self, target: Target, threshold_us: float, known: Mapping[str, Estimate] | None = None,
                 known_chains: Mapping[str, tuple[float, float]] | None = None) -> None:
        self.target, self.threshold_us = target, threshold_us
        self._best: dict[str, Estimate] = dict(known or {})
        self._chains: dict[str, tuple[float, float]] = dict(known_chains or {})
        self._floors: dict[str, float] = {}
        self.constructed = 0  # estimates made here, not known before

    def best(self, compute: Compute) -> Estimate:
        """The model's estimate for the best constructed tiling of `compute`."""
        key = _hash(compute)
        if key not in self._best:
            self._best[key] = construct(compute, self.target, top_k=1)[0].estimate
            self.constructed += 1
        return self._best[key]

    @property
    def prices(self) -> dict[str, Estimate]:
        """Every estimate it holds, by Compute hash (what price_record.py keeps)."""
        return dict(self._best)

    @property
    def chains(self) -> dict[str, tuple[float, float]]:
        """Every chain group's prices it holds (`chain_prices`), by Compute hash."""
        return dict(self._chains)

    def floor_us(self, compute: Compute) -> float:
        """A lower bound on `compute`'s time: its roofline, from the TE analyses alone."""
        key = _hash(compute)
        if key not in self._floors:
            flops, nbytes = kernel_work(compute, self.target)
            peak = self.target.peak_flops.get(compute.acc_dtype, self.target.peak_flops["float32"])
            self._floors[key] = max(flops / peak, nbytes / self.target.levels[0].bandwidth) * 1e6
        return self._floors[key]

    def heavy(self, parts: Sequence[Compute]) -> bool:
        """Whether `parts` together may take the threshold or more (worth pricing or timing)."""
        return sum(self.floor_us(p) for p in parts) >= self.threshold_us

    def price(self, fused: Compute, parts: Sequence[Compute]) -> tuple[float, float] | None:
        """The connection rule's prices (groups.ConnectRule): predicted microseconds of
        `fused` and of `parts` run one after another; None for parts too light to price."""
        if not self.heavy(parts):
            return None
        if is_chain_group(fused):  # its members alike, on the tiles the chain kernel runs
            key = _hash(fused)
            if key not in self._chains:
                self._chains[key] = chain_prices(fused, self.target)
                self.constructed += 1
            return self._chains[key]
        return self.best(fused).time_us, sum(self.best(p).time_us for p in parts)


def _hash(compute: Compute) -> str:
    return hashlib.sha256(compute.canonical().encode()).hexdigest()
