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
from compiler.runtime.kernel_timer import KernelCall, time_kernels

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
    producer left it, in cache. Candidates of one Compute share buffers and need none."""
    library, log = _library(tmp_path)
    candidates = _copy(16)  # two candidates of one kernel: one Compute, so one set of buffers
    calls = [KernelCall("a", candidates), KernelCall("b", candidates), KernelCall("slow", _copy(32))]
    times = time_kernels(library, calls)
    logged = log.read_text()
    assert logged[:3] == "abs"  # the warm-up calls, then rounds of all three
    rounds = logged[3:]
    # a follows slow (other buffers): warmed; b follows a (the same): not; slow follows b: warmed
    assert len(rounds) % 5 == 0 and rounds == "aabss" * (len(rounds) // 5) and len(rounds) >= 15
    assert times["slow"] > 10 * max(times["a"], times["b"])


def test_buffers_beyond_a_batch_are_timed_in_a_later_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_timer, "_BATCH_BYTES", 3 * 16 * 4)  # one 16-element copy's buffers, not two
    library, log = _library(tmp_path)
    times = time_kernels(library, [KernelCall("a", _copy(16)), KernelCall("b", _copy(16))])
    logged = log.read_text()
    assert logged.index("b") == logged.rindex("a") + 1  # every call of a before the first of b
    assert set(times) == {"a", "b"}
