"""The benchmark's timing: the two runtimes are timed in alternating blocks."""

from compiler.bench.measure import time_interleaved


def test_calls_alternate_in_blocks_until_both_have_enough_runs() -> None:
    calls: list[str] = []
    ours, theirs = time_interleaved([lambda: calls.append("a"), lambda: calls.append("b")],
                                    min_runs=7, min_seconds=0.0, block=3, warmup=1)
    assert calls[:2] == ["a", "b"]  # warm-up, once each
    timed = calls[2:]
    assert timed[:9] == ["a"] * 3 + ["b"] * 3 + ["a"] * 3  # blocks of 3, alternating
    assert len(ours) == len(theirs) == 9  # whole blocks, at least min_runs each
    assert timed.count("a") == timed.count("b") == 9
    assert all(t >= 0 for t in ours + theirs)
