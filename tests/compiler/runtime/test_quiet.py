"""Waiting for the process's other threads to stop running before a timing (runtime/quiet.py)."""

import sys
import threading
import time

import pytest

from compiler.runtime import quiet

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")


def _spin(seconds: float, started: threading.Event, stop: threading.Event) -> None:
    started.set()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and not stop.is_set():
        pass


def test_a_timing_waits_for_a_thread_that_spins_a_while(monkeypatch) -> None:
    """OpenBLAS's workers spin about 0.1 s after a matmul: the wait lasts until they stop."""
    monkeypatch.setattr(quiet, "_PERMANENT", set())
    assert quiet.wait_until_quiet() < 0.05  # nothing else runs
    started, stop = threading.Event(), threading.Event()
    spinner = threading.Thread(target=_spin, args=(0.15, started, stop))
    spinner.start()
    started.wait()
    waited = quiet.wait_until_quiet(timeout_s=2.0)
    spinner.join()
    assert 0.1 <= waited < 1.0 and not quiet._PERMANENT


def test_a_thread_that_never_stops_is_waited_for_once(monkeypatch) -> None:
    monkeypatch.setattr(quiet, "_PERMANENT", set())
    started, stop = threading.Event(), threading.Event()
    spinner = threading.Thread(target=_spin, args=(30.0, started, stop))
    spinner.start()
    started.wait()
    try:
        assert quiet.wait_until_quiet(timeout_s=0.2) >= 0.2
        assert spinner.native_id in quiet._PERMANENT
        assert quiet.wait_until_quiet(timeout_s=0.2) < 0.1  # taken for busy by design
    finally:
        stop.set()
        spinner.join()
