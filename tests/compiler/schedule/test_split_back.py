"""The measured split-back's verdicts (compiler/schedule/tilegraph/split.py `time_groups`) on
a stand-in device: which groups are timed a second time, and what they are then."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

from compiler.schedule.measure import Timing
from compiler.schedule.tilegraph.split import time_groups


def _group() -> SimpleNamespace:
    """A group of two parts (a and b) whose fused kernel is "fused"."""
    return SimpleNamespace(output=7, apart=["a", "b"], kept=True, split_by="", measured_fused_us=None,
                           measured_unfused_us=None)


def _kernel(key: str) -> SimpleNamespace:
    return SimpleNamespace(key=key, tile=None)


def _device(first: dict[str, float], later: dict[str, float], calls: list[list[str]]):
    """Times each key `first[key]` the first time it is asked for, `later[key]` after."""
    seen: set[str] = set()

    def time(timings: Sequence[Timing]) -> dict[str, list[float]]:
        calls.append([t.key for t in timings])
        out = {t.key: [later[t.key] if t.key in seen else first[t.key]] for t in timings}
        seen.update(t.key for t in timings)
        return out
    return time


def _verdict(first: dict[str, float], later: dict[str, float], alone: dict[str, float]
             ) -> tuple[SimpleNamespace, list[list[str]]]:
    g, calls = _group(), []
    time_groups([g], {7: _kernel("fused")}, _kernel, {}, _device(first, later, calls),
                alone=alone.get)
    return g, calls


def test_a_near_tie_whose_parts_met_a_spell_is_timed_again_and_split() -> None:
    """The check: fused 2.3 against parts 1.2 + 1.2 (a near tie, 0.96x), where the parts'
    own top-k timed them at 1.0: timed again, they keep 1.0, and the group (1.15x) is split."""
    g, calls = _verdict({"fused": 2.3, "a": 1.2, "b": 1.2}, {"fused": 2.3, "a": 1.0, "b": 1.0},
                        {"a": 1.0, "b": 1.0})
    assert len(calls) == 2
    assert (g.measured_fused_us, g.measured_unfused_us) == (2.3, 2.0)
    assert not g.kept and g.split_by == "measured"


def test_a_near_tie_whose_parts_measured_as_alone_is_kept_on_one_timing() -> None:
    g, calls = _verdict({"fused": 2.1, "a": 1.0, "b": 1.0}, {"fused": 9.0, "a": 9.0, "b": 9.0},
                        {"a": 1.0, "b": 1.0})
    assert len(calls) == 1 and g.kept and g.measured_fused_us == 2.1


def test_a_near_tie_whose_parts_were_never_timed_alone_is_kept_on_one_timing() -> None:
    """Parts without a top-k time (a register group's) give no sign of a spell."""
    g, calls = _verdict({"fused": 2.1, "a": 1.5, "b": 1.5}, {"fused": 9.0, "a": 1.0, "b": 1.0}, {})
    assert len(calls) == 1 and g.kept


def test_a_group_just_above_noise_is_timed_again_as_before() -> None:
    """1.15x its parts in the check, 1.0x the second time: it keeps its faster time and stays."""
    g, calls = _verdict({"fused": 2.3, "a": 1.0, "b": 1.0}, {"fused": 2.0, "a": 1.0, "b": 1.0}, {})
    assert len(calls) == 2 and g.kept and g.measured_fused_us == 2.0
