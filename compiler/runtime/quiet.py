"""Waiting, before something is timed, until no other thread of this process is running.

What runs beside a timing takes its cores: OpenBLAS's worker threads spin for about 0.1 s
after every multi-threaded call (numpy's matmul on a Winograd transform's weights, made
while a lowering choice's small model is built), and a choice is timed for 0.3 s. Timed
so, the first of ResNet-50's choices measured Winograd at 1.14-1.20 ms a copy where it
takes 0.52-0.64: a near tie with the direct convolution (1.15), which a host with a
narrower margin would have decided the wrong way and kept in the cache.

Linux only (`/proc/self/task`); elsewhere nothing is waited for.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

TASKS = Path("/proc/self/task")
QUIET_TIMEOUT_S = 0.3  # OpenBLAS spins for about 0.1 s
POLL_S = 0.005
# Threads still running after a whole wait: taken for busy by design (a spinning pool that
# never sleeps), not waited for again by this process.
_PERMANENT: set[int] = set()


def running_threads() -> set[int]:
    """Thread ids of this process, other than the caller's and those taken for permanently
    busy, that are running or runnable (empty where /proc is not there)."""
    me = threading.get_native_id()
    try:
        tids = [int(t) for t in os.listdir(TASKS)]
    except OSError:
        return set()
    running = set()
    for tid in tids:
        if tid == me or tid in _PERMANENT:
            continue
        try:
            stat = (TASKS / str(tid) / "stat").read_text()
        except OSError:  # the thread has ended
            continue
        if stat[stat.rindex(")") + 2] == "R":  # the state follows the parenthesised name
            running.add(tid)
    return running


def wait_until_quiet(timeout_s: float = QUIET_TIMEOUT_S) -> float:
    """Wait until no other thread of this process runs, at most `timeout_s`; returns the
    seconds waited. Threads that run through a whole wait are not waited for again."""
    t0 = time.perf_counter()
    while running := running_threads():
        if time.perf_counter() - t0 >= timeout_s:
            _PERMANENT.update(running)
            break
        time.sleep(POLL_S)
    return time.perf_counter() - t0
