"""Measured CPU numbers (`tileforge targets --measure`): DRAM bandwidth and matmul FLOP/s.

Measured once and stored as JSON under `$TILEFORGE_HOME/targets/`; the CPU
target reads them back when they were taken on a CPU of the same model and
core count. Run as a module (`python -m compiler.target.measure N REPEATS`)
it prints one matmul rate: that is how the single-thread rate is taken, in a
child whose BLAS thread count is fixed before numpy loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

MEASUREMENTS_FILE = "cpu-measured.json"
_BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                     "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def tileforge_home() -> Path:
    """$TILEFORGE_HOME, or ~/.tileforge."""
    env = os.environ.get("TILEFORGE_HOME")
    return Path(env) if env else Path.home() / ".tileforge"


def targets_dir() -> Path:
    """Where measured target numbers live: $TILEFORGE_HOME/targets."""
    return tileforge_home() / "targets"


def matmul_rate(n: int, repeats: int) -> float:
    """Best FLOP/s of an n x n float32 numpy matmul over `repeats` runs (threads as configured)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b  # warm-up: thread pool start, page faults
    best = min(timed(lambda: a @ b) for _ in range(repeats))
    return 2.0 * n**3 / best


def copy_bandwidth(nbytes: int, repeats: int) -> float:
    """Best bytes/s of a numpy array copy of `nbytes` (read + write counted)."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # warm-up: touch every page
    best = min(timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return 2.0 * src.nbytes / best


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` takes (never 0: rates divide by it)."""
    start = time.perf_counter()
    fn()
    return max(time.perf_counter() - start, 1e-9)


def _single_thread_rate(n: int, repeats: int) -> float:
    """The matmul rate measured in a child process whose BLAS uses one thread."""
    out = child_stdout("compiler.target.measure", [str(n), str(repeats)], dict.fromkeys(_BLAS_THREAD_VARS, "1"))
    return float(out.strip().splitlines()[-1])


def child_stdout(module: str, args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> str:
    """What `python -m module args` prints, run in a child process (with `env` added to
    this one's, and this checkout first on its path): a measurement whose threads or
    loaded libraries must not stay in the caller's process."""
    child = {**os.environ, **(env or {})}
    root = str(Path(__file__).resolve().parents[2])
    child["PYTHONPATH"] = os.pathsep.join(p for p in (root, child.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=300, env=child, check=True).stdout


def measure_cpu(directory: Path | None = None, copy_bytes: int = 512 << 20,
                matmul_n: int = 1024, repeats: int = 5, fma_peak: tuple[float, float] | None = None) -> dict:
    """Measure this machine's DRAM bandwidth and peak FLOP/s and store them as JSON.

    The peak is numpy's matmul rate or, where the caller measured it and it is higher,
    `fma_peak` (one thread, all threads: compiler/build/fma_peak.py; a BLAS without
    kernels for the host's vector width reports a fraction of the FMA units' rate).
    `directory` defaults to `$TILEFORGE_HOME/targets`. Returns what was stored.
    The copy should be several times the last-level cache so it measures DRAM.
    """
    from compiler.target.cpu import read_cpu_facts  # cpu imports this module for loading

    facts = read_cpu_facts()
    result = {
        "cpu_model": facts.model,
        "cores": facts.cores,
        "dram_bandwidth": copy_bandwidth(copy_bytes, repeats),
        "matmul_1thread": _single_thread_rate(matmul_n, repeats),
        "matmul_all_threads": matmul_rate(matmul_n, repeats),
        "numpy": np.__version__,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    fma = fma_peak or (0.0, 0.0)
    result["flops_1thread"] = max(result["matmul_1thread"], fma[0])
    result["flops_all_threads"] = max(result["matmul_all_threads"], fma[1])
    folder = directory or targets_dir()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{MEASUREMENTS_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(folder / MEASUREMENTS_FILE)  # atomic: readers never see half a file
    return result


def load_cpu_measurements(model: str, cores: int, directory: Path | None = None) -> dict | None:
    """Stored measurements for this CPU model and core count, or None (absent, stale or corrupt).

    `directory` defaults to `$TILEFORGE_HOME/targets`.
    """
    path = (directory or targets_dir()) / MEASUREMENTS_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("cpu_model") != model or data.get("cores") != cores:
        return None
    try:
        numbers = [float(data[k]) for k in ("dram_bandwidth", "flops_1thread", "flops_all_threads")]
    except (KeyError, TypeError, ValueError):
        return None
    return data if all(x > 0 for x in numbers) else None


if __name__ == "__main__":
    print(matmul_rate(int(sys.argv[1]), int(sys.argv[2])))
