"""Which measured candidate runs: the fastest, and the model's order where timings tie."""

from compiler.schedule.measure import TIE, fastest


def test_the_fastest_measured_candidate_runs() -> None:
    assert fastest([120.0, 80.0, 100.0]) == 1
    assert fastest([None, 90.0, 60.0]) == 2  # a candidate that was not timed never wins


def test_timings_within_the_tie_keep_the_models_order() -> None:
    """Timed hot, within noise of each other, the candidate the model ranked first runs: a
    1 x 1 stride-2 convolution read in place tied with its patches gathered (49.7 and 50.1
    us) and took 115 us in the model's run against the gathered one's 29."""
    assert fastest([50.1, 70.0, 49.7]) == 0
    assert fastest([50.0 * (1 + 2 * TIE), 50.0]) == 1  # beyond the tie: measured faster wins


def test_nothing_timed_keeps_the_models_first() -> None:
    assert fastest(None) == 0
    assert fastest([]) == 0
    assert fastest([None, None]) == 0
