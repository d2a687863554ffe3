"""The benchmark's timing: the runtimes are timed in alternating phases."""

from compiler.bench.measure import time_interleaved


def test_calls_alternate_in_phases_until_both_have_enough_runs() -> None:
    calls: list[str] = []
    ours, theirs = time_interleaved([lambda: calls.append("a"), lambda: calls.append("b")],
                                    min_runs=7, min_seconds=0.0, phase_seconds=0.0, settle_seconds=0.0, warmup=1)
    assert calls[:2] == ["a", "b"]  # warm-up, once each
    timed = calls[2:]
    assert timed[:4] == ["a", "b", "a", "b"]  # a zero-length phase is one call: strict alternation
    assert len(ours) == len(theirs) == 7 and len(timed) == 14
    assert all(t >= 0 for t in ours + theirs)


def test_a_phase_keeps_calling_until_its_time_is_up() -> None:
    calls: list[str] = []
    ours, theirs = time_interleaved([lambda: calls.append("a"), lambda: calls.append("b")],
                                    min_runs=1, min_seconds=0.0, phase_seconds=0.01, settle_seconds=0.0, warmup=0)
    assert len(ours) > 1 and len(theirs) > 1  # many calls of each in one phase
    assert calls == ["a"] * len(ours) + ["b"] * len(theirs)
