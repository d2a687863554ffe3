"""Records of the groups the tile-graph passes make (Welder's connected sub-graphs).

Every fusion rewrite asks `GroupLog.allows` before it connects nodes and tells
`GroupLog.record` what it made: the fused node (named by its output tensor, which
later passes keep while they renumber nodes), the lowered nodes it stands for and
the level its members meet at. A pass that makes groups of its own (attention,
convolution blocks) records them the same way; the Graph rewrite stays the pass's.

`allows` refuses a connection whose members were split back after measuring
(`split`) and asks the connection rule (pricing.py: the cost model) about the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from compiler.ir.graph import Graph, Node, TensorKind
from compiler.ir.te import Compute


class Level(StrEnum):
    """Where a group's intermediates live (Welder's connection level)."""

    REGISTERS = "registers"
    ROWS = "cache rows"
    ATTENTION = "cache blocks across contractions"  # scores, softmax and P V (attention.py)
    L2_TILES = "L2 tiles"  # GraphTurbo's depth-first tiles of a convolution chain (schedule/partition.py)


@dataclass(frozen=True)
class Member:
    """One lowered node of a group: what it would run as on its own."""

    node: int  # the lowered graph's node id
    op: str
    compute: Compute
    constants: tuple[int, ...]  # input positions read from weights (part of its kernel key)


@dataclass
class Group:
    """A fused node and the lowered nodes it stands for, with the verdicts on it. `parts`:
    the kernels it replaces as they run where it is not made (each a lowered node, or a
    group made before it at a level of its own: a convolution chain's members are register
    groups); empty where they are its members."""

    output: int  # tensor id the fused node writes
    level: Level
    members: tuple[Member, ...]
    parts: tuple[Member, ...] = ()
    kept: bool = True
    split_by: str = ""  # why not kept: "model" (priced slower), "measured" (timed slower),
    # "cache" (split back by an earlier compile: its parts are cached, its fused kernel is not)
    # or "untimed" (first made in the last plan, which keeps only groups measured before)
    predicted_fused_us: float | None = None
    predicted_unfused_us: float | None = None
    measured_fused_us: float | None = None
    measured_unfused_us: float | None = None

    @property
    def apart(self) -> tuple[Member, ...]:
        """The kernels that run in its place where it is split back."""
        return self.parts or self.members

    @property
    def ids(self) -> frozenset[int]:
        """The lowered node ids of the members: a group's identity across re-plans."""
        return frozenset(m.node for m in self.members)

    def to_json(self) -> dict:
        """The report's entry: members' ops, level, times and verdict."""
        return {"ops": [m.op for m in self.members], "nodes": [m.node for m in self.members],
                "level": str(self.level), "kept": self.kept, "split_by": self.split_by,
                "predicted_fused_us": self.predicted_fused_us,
                "predicted_unfused_us": self.predicted_unfused_us,
                "measured_fused_us": self.measured_fused_us,
                "measured_unfused_us": self.measured_unfused_us}


NOT_MADE = -1  # the output of a group refused before it was made

# (fused Compute, the parts it replaces) -> predicted (fused, parts) microseconds, or None
# where the parts are too light to be worth pricing (they connect)
ConnectRule = Callable[[Compute, Sequence[Compute]], tuple[float, float] | None]


class GroupLog:
    """The groups made from one lowered graph, by the fused node's output tensor."""

    def __init__(self, graph: Graph, rule: ConnectRule | None = None,
                 split: Iterable[frozenset[int]] = (), confirmed: Iterable[frozenset[int]] | None = None) -> None:
        """`split`: member sets timed slower than their parts (never made again);
        `confirmed`, where given: the only member sets a priced group above register level
        may have (those timed no slower than their parts in an earlier round)."""
        # tensors read from weights (fusion makes no new ones, and may drop others)
        self.weights = {t for t in graph.tensors if graph.tensors[graph.storage_of(t)].kind == TensorKind.WEIGHT}
        self.lowered: dict[int, Member] = {n.output: Member(n.id, n.op, n.compute, self._constants(n))
                                           for n in graph.nodes}
        self.groups: dict[int, Group] = {}
        self.rule = rule
        self.split = set(split)
        self.confirmed = None if confirmed is None else set(confirmed)
        self.refused: dict[frozenset[int], Group] = {}  # connections the rule priced slower
        self.priced: dict[frozenset[int], tuple[float, float]] = {}  # allowed ones' prices

    def members(self, node: Node) -> tuple[Member, ...]:
        """The lowered nodes `node` stands for (itself, when it is not a group)."""
        group = self.groups.get(node.output)
        return group.members if group is not None else (self.lowered[node.output],)

    def _constants(self, node: Node) -> tuple[int, ...]:
        return tuple(pos for pos, t in enumerate(node.inputs) if t in self.weights)

    def _apart(self, node: Node) -> Member:
        """`node` as the kernel it runs as on its own: a lowered node, or a group made before."""
        group = self.groups.get(node.output)
        if group is None:
            return self.lowered[node.output]
        return Member(group.members[0].node, "+".join(m.op for m in group.members), node.compute,
                      self._constants(node))

    def _union(self, parts: Sequence[Node]) -> tuple[Member, ...]:
        return tuple(sorted((m for p in parts for m in self.members(p)), key=lambda m: m.node))

    def allows(self, level: Level, parts: Sequence[Node], fused: Compute) -> bool:
        """Whether `parts` may become the one node computing `fused`: not split back, and
        predicted no slower than the parts one after another (refusals are kept, with the
        prices, in `refused`)."""
        members = self._union(parts)
        ids = frozenset(m.node for m in members)
        if ids in self.split:
            return False
        price = None if self.rule is None else self.rule(fused, [p.compute for p in parts])
        if price is None:
            return True
        untimed = self.confirmed is not None and level != Level.REGISTERS and ids not in self.confirmed
        if price[0] <= price[1] and not untimed:
            self.priced[ids] = price
            return True
        self.refused[ids] = Group(NOT_MADE, level, members, kept=False,
                                  split_by="model" if price[0] > price[1] else "untimed",
                                  predicted_fused_us=round(price[0], 3),
                                  predicted_unfused_us=round(price[1], 3))
        return False

    def record(self, level: Level, parts: Sequence[Node], fused: Node) -> None:
        """`fused` now stands for `parts` (nodes, or groups of them, of this log's graph)."""
        members = self._union(parts)
        apart = tuple(self._apart(p) for p in parts) if any(p.output in self.groups for p in parts) else ()
        for p in parts:
            self.groups.pop(p.output, None)
        group = Group(fused.output, level, members, apart)
        price = self.priced.get(group.ids)
        if price is not None:  # the connection rule's own prices (the report's otherwise)
            group.predicted_fused_us, group.predicted_unfused_us = round(price[0], 3), round(price[1], 3)
        self.groups[fused.output] = group


def lowered_copy(graph: Graph) -> Graph:
    """A copy of `graph` the fusion passes may rewrite (they renumber nodes and drop
    tensors, never change a tensor or a Compute), so a plan can be made again from it."""
    return dataclasses.replace(graph, tensors=dict(graph.tensors),
                               nodes=[dataclasses.replace(n) for n in graph.nodes],
                               inputs=list(graph.inputs), outputs=list(graph.outputs))
