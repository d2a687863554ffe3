"""Arena placement: live buffers never overlap, dead ones are reused."""

import random

import pytest

from compiler.schedule.arena import ALIGNMENT, Lifetime, align_up, place


def assert_valid(lifetimes: dict[int, Lifetime], layout) -> None:
    assert set(layout.offsets) == set(lifetimes)
    spans = {b: (off, off + max(lifetimes[b].nbytes, 1)) for b, off in layout.offsets.items()}
    for b, (start, end) in spans.items():
        assert start % ALIGNMENT == 0
        assert end <= layout.total
        for o, (s2, e2) in spans.items():
            if o != b and lifetimes[o].overlaps(lifetimes[b]):
                assert end <= s2 or e2 <= start, f"buffers {b} and {o} are live together and overlap"


def test_chain_reuses_memory_two_steps_later():
    # a -> b -> c -> d: a dies at step 1 (where b is born), so c (born at 2) can take a's place
    lts = {0: Lifetime(1000, 0, 1), 1: Lifetime(1000, 1, 2), 2: Lifetime(1000, 2, 3), 3: Lifetime(1000, 3, 4)}
    layout = place(lts)
    assert_valid(lts, layout)
    assert layout.total == 2 * align_up(1000)
    assert layout.offsets[0] != layout.offsets[1]  # output never aliases its input


def test_best_fit_takes_the_smallest_hole():
    # placed largest first: 0 @0, 1 @640, 2 @896, 3 @1088; once 0 and 2 are dead,
    # 4 must go into 2's 192-byte hole rather than 0's 640-byte one
    lts = {
        0: Lifetime(640, 0, 0),
        1: Lifetime(256, 0, 5),
        2: Lifetime(192, 0, 0),
        3: Lifetime(192, 0, 5),
        4: Lifetime(128, 1, 2),
    }
    layout = place(lts)
    assert_valid(lts, layout)
    assert layout.offsets[2] == 896
    assert layout.offsets[4] == layout.offsets[2]


def test_empty_and_zero_sized_buffers():
    assert place({}).total == 0
    layout = place({0: Lifetime(0, 0, 1), 1: Lifetime(4, 0, 1)})
    assert layout.offsets[0] != layout.offsets[1]


def test_bad_lifetime_is_refused():
    with pytest.raises(ValueError):
        Lifetime(8, 3, 2)


def test_random_lifetimes_never_collide_and_reuse_happens():
    rng = random.Random(1)
    reused = 0
    for _ in range(300):
        n = rng.randint(1, 40)
        lts = {}
        for b in range(n):
            first = rng.randint(0, 20)
            lts[b] = Lifetime(rng.choice([1, 4, 100, 4096, rng.randint(1, 50_000)]), first,
                              first + rng.randint(0, 5))
        layout = place(lts)
        assert_valid(lts, layout)
        peak = max(sum(align_up(max(lt.nbytes, 1)) for lt in lts.values() if lt.first <= s <= lt.last)
                   for s in range(26))
        assert peak <= layout.total <= sum(align_up(max(lt.nbytes, 1)) for lt in lts.values())
        reused += layout.total < sum(align_up(max(lt.nbytes, 1)) for lt in lts.values())
    assert reused > 200
