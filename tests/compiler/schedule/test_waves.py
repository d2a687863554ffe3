"""Rammer wavefronts over kernel dependencies."""

import random

import pytest

from compiler.schedule.waves import wavefronts


def test_chain_is_one_node_per_wave():
    assert wavefronts({0: set(), 1: {0}, 2: {1}}) == [[0], [1], [2]]


def test_diamond_puts_the_branches_together():
    deps = {0: set(), 1: {0}, 2: {0}, 3: {1, 2}}
    assert wavefronts(deps) == [[0], [1, 2], [3]]


def test_node_waits_for_its_latest_predecessor():
    # 3 is ready only after 2, which is ready only after 1
    deps = {0: set(), 1: {0}, 2: {1}, 3: {0, 2}, 4: set()}
    assert wavefronts(deps) == [[0, 4], [1], [2], [3]]


def test_empty_graph_has_no_waves():
    assert wavefronts({}) == []


def test_cycle_and_unknown_dependency_are_refused():
    with pytest.raises(ValueError, match="cycle"):
        wavefronts({0: {1}, 1: {0}, 2: set()})
    with pytest.raises(ValueError, match="unknown"):
        wavefronts({0: {7}})


def test_random_dags_respect_dependencies_and_are_breadth_first():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 30)
        deps = {i: {j for j in range(i) if rng.random() < 0.2} for i in range(n)}
        waves = wavefronts(deps)
        wave_of = {node: w for w, nodes in enumerate(waves) for node in nodes}
        assert sorted(wave_of) == list(range(n))
        for node, pre in deps.items():
            assert all(wave_of[p] < wave_of[node] for p in pre)
            # breadth-first: a node runs right after its latest predecessor
            assert wave_of[node] == (max((wave_of[p] for p in pre), default=-1) + 1)
