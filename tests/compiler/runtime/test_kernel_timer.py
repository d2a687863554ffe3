"""The top-k's kernel timer (compiler/runtime/kernel_timer.py): a kernel's candidates are
timed in rounds, one call of each per round, so that a slow spell of a shared host
slows them all alike; each gets its own median."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from compiler.ir.te import Axis, Compute, Load, TensorType, Var
from compiler.runtime import kernel_timer
from compiler.runtime.kernel_timer import KernelCall, round_order, time_kernels

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

# Each kernel appends its letter to a log file; `slow` spins first, so its median is larger.
_SOURCE = r"""
#include <stdio.h>
static void note(char c) { FILE* f = fopen(LOG, "a"); fputc(c, f); fclose(f); }
void a(float* out, const float* x) { note('a'); out[0] = x[0]; }
void b(float* out, const float* x) { note('b'); out[0] = x[0]; }
void slow(float* out, const float* x) {
  note('s');
  volatile float t = x[0];
  for (int i = 0; i < 2000000; ++i) t = t * 0.5f + 1.0f;
  out[0] = t;
}
"""


def _library(tmp_path: Path) -> tuple[bytes, Path]:
    log = tmp_path / "calls.log"
    src = tmp_path / "k.c"
    src.write_text(_SOURCE)
    so = tmp_path / "k.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", f'-DLOG="{log}"', str(src), "-o", str(so)], check=True)
    return so.read_bytes(), log


def _copy(n: int) -> Compute:
    """out[i] = x[i] over `n` elements: the shapes the timer draws buffers for."""
    return Compute((Axis("i0", n),), Load(0, (Var("i0", "int64"),), "float32"), (TensorType((n,), "float32"),),
                   "float32")


def test_calls_are_timed_in_rounds(tmp_path: Path) -> None:
    """A kernel's candidates, and kernels of other Computes alike (a fused group and its
    parts): one timed call of each per round. A call on other buffers than the call before
    it is made once more, untimed, just before: in a run a kernel finds its input as its
    producer left it, in cache. Candidates of one Compute share buffers and need none; their
    order turns every round, so each is the first of them as often as the others."""
    library, log = _library(tmp_path)
    candidates = _copy(16)  # two candidates of one kernel: one Compute, so one set of buffers
    calls = [KernelCall("a", candidates), KernelCall("b", candidates), KernelCall("slow", _copy(32))]
    times = time_kernels(library, calls)
    logged = log.read_text()
    assert logged[:3] == "abs"  # the warm-up calls, then rounds of all three
    rounds = logged[3:]
    # the first candidate follows slow (other buffers): warmed; the second follows it (the
    # same buffers): not; slow follows them: warmed. a and b take turns at being first.
    assert len(rounds) % 10 in (0, 5) and len(rounds) >= 15
    assert rounds == ("aabss" + "bbass") * (len(rounds) // 10) + "aabss" * (len(rounds) % 10 // 5)
    assert times["slow"] > 10 * max(times["a"], times["b"])


def test_buffers_beyond_a_batch_are_timed_in_a_later_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_timer, "_BATCH_BYTES", 3 * 16 * 4)  # one 16-element copy's buffers, not two
    library, log = _library(tmp_path)
    times = time_kernels(library, [KernelCall("a", _copy(16)), KernelCall("b", _copy(16))])
    logged = log.read_text()
    assert logged.index("b") == logged.rindex("a") + 1  # every call of a before the first of b
    assert set(times) == {"a", "b"}


def test_each_candidate_is_first_of_its_run_as_often_as_the_others() -> None:
    """Runs of calls on the same buffers keep their place in a round and turn by one call a
    round; only a run's first call is rewarmed, and only where other runs come between."""
    keys = ["x", "x", "x", "y", "z", "z"]
    orders = [round_order(keys, r) for r in range(3)]
    assert [i for i, _ in orders[0]] == [0, 1, 2, 3, 4, 5]
    assert [i for i, _ in orders[1]] == [1, 2, 0, 3, 5, 4]
    assert [i for i, _ in orders[2]] == [2, 0, 1, 3, 4, 5]
    assert all([w for _, w in o] == [True, False, False, True, True, False] for o in orders)
    assert round_order(["x", "x"], 1) == [(1, False), (0, False)]  # one run: nothing comes between


def test_a_candidate_clearly_slower_than_its_rival_leaves_the_race(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first rounds, a candidate whose fastest run is far over its kernel's
    fastest candidate is timed no more; a call alone on its buffers runs every round."""
    # a budget the slow candidate's first rounds cannot spend, however busy the host (at
    # the default, a make test beside other work once left b its first rounds only)
    monkeypatch.setattr(kernel_timer, "_BUDGET_S", 0.2)
    library, log = _library(tmp_path)
    candidates = _copy(16)
    times = time_kernels(library, [KernelCall("a", candidates), KernelCall("slow", candidates),
                                   KernelCall("b", _copy(32))])
    logged = log.read_text()
    # the warm-up, then the first rounds only (each maybe rewarmed); b is timed on and on
    assert logged.count("s") <= 1 + 2 * kernel_timer._MIN_RUNS < logged.count("b")
    assert logged.count("a") > 2 * logged.count("s") and times["slow"] > 10 * times["a"]


def test_still_racing_keeps_each_kernels_close_candidates() -> None:
    keys = ["k", "k", "k", "j"]
    times = [[1.0, 1.1, 1.0], [1.2, 1.3, 1.2], [1.3, 1.5, 1.4], [9.0, 9.0, 9.0]]
    assert kernel_timer.still_racing([0, 1, 2, 3], keys, times) == [0, 1, 3]  # 1.3 > 1.25 x 1.0
