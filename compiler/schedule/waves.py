"""Rammer's wavefronts: a breadth-first topological walk over kernel dependencies.

Nodes that become ready at the same time (all their predecessors finished in
earlier waves) form one wave; the members of a wave are mutually independent,
so they may run concurrently, with a barrier between waves.
"""

from __future__ import annotations

from collections.abc import Mapping, Set


def wavefronts(deps: Mapping[int, Set[int]]) -> list[list[int]]:
    """Group nodes into waves; `deps[n]` are the nodes that must finish before `n` starts.

    Every node appears as a key (possibly with no deps). Waves are sorted for
    determinism. A dependency on an unknown node or a cycle raises ValueError.
    """
    waiting: dict[int, int] = {}
    users: dict[int, list[int]] = {n: [] for n in deps}
    for n, pre in deps.items():
        unknown = set(pre) - deps.keys()
        if unknown:
            raise ValueError(f"node {n} depends on unknown nodes {sorted(unknown)}")
        waiting[n] = len(set(pre))
        for p in set(pre):
            users[p].append(n)
    wave = sorted(n for n, count in waiting.items() if count == 0)
    waves: list[list[int]] = []
    while wave:
        waves.append(wave)
        ready = []
        for n in wave:
            for u in users[n]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.append(u)
        wave = sorted(ready)
    placed = sum(len(w) for w in waves)
    if placed != len(deps):
        stuck = sorted(n for n, count in waiting.items() if count > 0)
        raise ValueError(f"dependency cycle among nodes {stuck}")
    return waves
