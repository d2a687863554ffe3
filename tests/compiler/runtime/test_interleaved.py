"""The interleaved timer: callables are timed in alternating phases."""

from compiler.runtime.interleaved import time_interleaved


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


def test_a_phase_waits_for_the_last_ones_spinning_threads() -> None:
    """A thread left spinning by one runtime (as onnxruntime's pool does for 50-60 ms after a
    run) would share a core with the next phase's: the wait lasts until it stops."""
    import threading
    import time

    from compiler.runtime.interleaved import wait_until_idle

    stop = time.perf_counter() + 0.15

    def spin() -> None:
        while time.perf_counter() < stop:
            pass

    spinner = threading.Thread(target=spin)
    spinner.start()
    waited = wait_until_idle(0.01)
    spinner.join()
    assert waited >= 0.14  # not before the spinning thread stopped
    assert wait_until_idle(0.01) < 0.1  # an idle process waits one window or two


def test_phases_come_round_by_round_and_are_compared_so() -> None:
    from compiler.runtime.interleaved import round_ratios, time_phases

    calls: list[str] = []
    ours, theirs = time_phases([lambda: calls.append("a"), lambda: calls.append("b")],
                               min_runs=5, min_seconds=0.0, phase_seconds=0.0, settle_seconds=0.0, warmup=0)
    assert len(ours) == len(theirs) == 5 and all(len(p) == 1 for p in ours + theirs)  # one call a phase
    assert calls == ["a", "b"] * 5
    assert round_ratios([[2.0, 4.0], [3.0]], [[1.0, 1.0], [6.0]]) == [3.0, 0.5]  # medians, round by round
