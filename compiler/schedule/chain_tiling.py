"""A convolution chain's tiling (compiler/schedule/partition.py decides it), recorded on
its `TileConfig.chain` and only read by compiler/codegen/c/chain.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChainTiling:
    """`split`: the capacity's split factor (smallest power of two fitting the group's
    peak live bytes into one core's L2); `rows`: output rows per tile (the split, made
    finer until every core has two instances and an interior tile, its halos included,
    fits that L2 too); `depth_first`: each tile runs through
    every member (else the members run whole, one after the other)."""

    split: int
    rows: int
    depth_first: bool

    def to_json(self) -> dict[str, Any]:
        return {"split": self.split, "rows": self.rows, "depth_first": self.depth_first}

    @staticmethod
    def from_json(j: dict[str, Any]) -> ChainTiling:
        return ChainTiling(int(j["split"]), int(j["rows"]), bool(j["depth_first"]))
