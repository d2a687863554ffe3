"""Measured split-back: where the device is present, a heavy group's fused kernel and its
parts (the kernels that run in its place where it is not made, each with its own tile: its
lowered members, or the groups it was made of) are timed, and a group that runs
slower than its parts one after another is split back (the plan is made again with
those members apart). The cost model proposes; the device has the last word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from compiler.schedule.measure import TimeFn, Timing
from compiler.schedule.plan import Kernel
from compiler.schedule.tilegraph.groups import Group, Member

# A fused kernel must measure this much slower than its parts to be split back: timings of one kernel vary run to
# run (7% seen on a busy 2-core host), and a plan should follow a real loss, not noise.
NOISE = 1.10
# ... and one that measures at most this much slower is timed once more before it is: the
# verdicts that flipped from one compile to the next were those near NOISE (an MBConv
# stage's SE scale + project + residual, 1.07-1.10 in five compiles, split back in one),
# while a real loss repeats far above it (its SiLU expand + depthwise chain, 1.34-1.36).
# So is a near tie (from 1 / NOISE up) where a part measured more than NOISE above its own
# top-k time: a spell met the parts, and a tie kept once stays kept (the kernel cache keeps
# the verdict). MobileNetV2's inverted residual chain on 56 x 56, two threads, Zen 4: in one
# compile of eight, 0.393 against parts of 0.389 ms, kept; in the others its parts measured
# 0.31-0.36 ms, within 3% of their top-k times, and it was split; in the model's run the
# chain took 0.397 ms, the parts 0.332.
DOUBT = 1.25


def time_groups(groups: Sequence[Group], fused: Mapping[int, Kernel], part: Callable[[Member], Kernel],
                known: dict[str, float], time: TimeFn,
                cached: Callable[[str], bool] = lambda key: False,
                alone: Callable[[str], float | None] = lambda key: None) -> list[Group]:
    """Time each group's fused kernel (`fused`, by the group's output) and its members'
    kernels (`part`), fill in the groups' measured times and mark those slower than their
    parts as not kept; returns those.

    `known` holds microseconds by kernel cache key of the groups checked in earlier rounds;
    what is timed here is added to it, and a group whose kernels it holds is not timed
    again. Otherwise the fused kernel and its parts are all timed now, together, in
    one request (the timer runs it in rounds): timed apart (the fused kernel's top-k time
    against its parts'), a slow spell of a shared host that met only one side decided the
    verdict (BERT-base's attention at seq 512 split back in one run of two).

    `cached` says whether the kernel cache holds a key: it holds an earlier compile's
    decision, and that decision stands, untimed. A group whose fused kernel it holds was
    kept then, and stays; one whose parts it holds, but not the fused kernel, was split
    back then, and stays apart (it is returned, without times). Timing noise then cannot
    flip a model's plan from one compile to the next, so a second compile hits the cache
    throughout (re-fusing where a margin was beaten let a loaded host's noise, larger than
    any margin, change the plan). Groups the cache knows in part are timed.

    `alone` gives a kernel's own top-k time by cache key, where it was timed (a part whose
    candidates were measured), else None."""
    groups = [g for g in groups if not cached(fused[g.output].key)]
    parts = {g.output: [part(m) for m in g.apart] for g in groups}
    slower = []
    for g in [g for g in groups if all(cached(k.key) for k in parts[g.output])]:
        g.kept, g.split_by = False, "cache"
        slower.append(g)
    groups = [g for g in groups if g.kept]
    todo: dict[str, Kernel] = {}
    for g in groups:
        kernels = (fused[g.output], *parts[g.output])
        if any(k.key not in known for k in kernels):
            for k in kernels:
                todo.setdefault(k.key, k)
    if todo:
        measured = time([Timing(key, k, [k.tile]) for key, k in todo.items()])
        known.update({key: times[0] for key, times in measured.items()})
    # A group that measures slower by less than DOUBT, or a near tie whose parts met a spell,
    # is timed once more with its parts before its verdict, each kernel keeping the faster
    # of its two times (timing every slower group again cost an MBConv stage's cold compile
    # 28%; every near tie, BERT's 17%).
    def spell_on_parts(g: Group) -> bool:
        return any((t := alone(k.key)) is not None and known[k.key] > NOISE * t for k in parts[g.output])
    doubtful = [g for g in groups if NOISE < (r := _ratio(g, fused, parts, known)) <= DOUBT
                or (1 / NOISE <= r <= NOISE and spell_on_parts(g))]
    again: dict[str, Kernel] = {k.key: k for g in doubtful for k in (fused[g.output], *parts[g.output])}
    if again:
        measured = time([Timing(key, k, [k.tile]) for key, k in again.items()])
        known.update({key: min(known[key], times[0]) for key, times in measured.items()})
    for g in groups:
        record_times(g, fused[g.output], parts[g.output], known)
        if _ratio(g, fused, parts, known) > NOISE:
            g.kept, g.split_by = False, "measured"
            slower.append(g)
    return slower


def record_times(g: Group, fused: Kernel, parts: Sequence[Kernel], known: Mapping[str, float]) -> None:
    """Set `g`'s measured fused and unfused times from `known` (microseconds by kernel cache
    key) where it holds its fused kernel and every part. The last plan is not timed (its
    groups were confirmed in earlier rounds, as other Group objects): its report takes
    their times from there."""
    if all(k.key in known for k in (fused, *parts)):
        g.measured_fused_us = round(known[fused.key], 3)
        g.measured_unfused_us = round(sum(known[k.key] for k in parts), 3)


def _ratio(g: Group, fused: Mapping[int, Kernel], parts: Mapping[int, Sequence[Kernel]],
           known: Mapping[str, float]) -> float:
    """`g`'s fused kernel's measured time over its parts' together."""
    return known[fused[g.output].key] / max(sum(known[k.key] for k in parts[g.output]), 1e-9)
