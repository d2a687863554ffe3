"""Runs a CPU artifact in-process: model.so via ctypes, weights and arena in aligned memory.

Threads: the kernels are OpenMP loops. `set_threads(n)` (or `load(path,
threads=n)`) makes every later `run` use n threads; without it OpenMP's
default applies, which the OMP_NUM_THREADS environment variable sets as long
as it is exported before the first OpenMP library is loaded in the process.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from compiler.abi import ABI_VERSION, RUN_NULL_POINTER
from compiler.aligned import ALIGNMENT, aligned_empty, data_address
from compiler.errors import ArtifactError, HostMismatchError
from compiler.runtime.artifact import WEIGHTS
from compiler.runtime.executable import (
    LoadedArtifact,
    check_inputs,
    copy_aligned,
    specs_from_manifest,
)
from compiler.runtime.outputs import OutputBuffers
from compiler.target.cpu import CpuFacts, host_lacks

LIBRARY = "model.so"
# Manifest keys: the machine and ISA features the library was built for.
MACHINE_KEY, FEATURES_KEY = "cpu_machine", "cpu_features"


class CpuExecutable(LoadedArtifact):
    """A loaded CPU artifact. Keeps no files open: everything is in memory once constructed."""

    def __init__(self, manifest: Mapping[str, Any], folder: Path, weights: bytes | memoryview | None = None,
                 threads: int | None = None) -> None:
        self._inputs = specs_from_manifest(manifest, "inputs")
        self._outputs = specs_from_manifest(manifest, "outputs")
        check_host(manifest)  # before dlopen: code for another ISA dies of SIGILL, not an error
        arena_bytes = _byte_count(manifest, "arena_bytes")
        self._weights = _read_weights(folder / WEIGHTS, _byte_count(manifest, "weights_bytes"), weights)
        self._arena = aligned_empty((max(arena_bytes, 1),), np.uint8)  # allocated once, reused
        self._lib = _open_library(folder / LIBRARY)
        # Fixed for the executable's life; taken once (numpy's .ctypes costs ~1.5 us a call).
        self._weights_ptr = ctypes.c_void_p(self._weights.ctypes.data)
        self._arena_ptr = ctypes.c_void_p(self._arena.ctypes.data)
        if threads is not None:  # before the packing, which runs on the threads runs will use
            self.set_threads(threads)
        # Once per arena: weights that kernels read packed are packed into it here.
        rc = self._lib.tf_prepare(self._weights_ptr, self._arena_ptr)
        if rc != 0:
            raise ArtifactError(f"model preparation failed with code {rc}")
        self._lock = threading.Lock()  # one arena: runs of one executable take turns
        # Filled in place on each run, under the lock (building them cost ~1 us each).
        self._in_ptrs = (ctypes.c_void_p * max(len(self._inputs), 1))()
        self._out_ptrs = (ctypes.c_void_p * max(len(self._outputs), 1))()
        self._out_buffers = OutputBuffers(self._outputs)  # taken under the lock
        self._run = self._lib.tf_run
        self._profile = _profile_functions(self._lib)

    def set_threads(self, n: int) -> None:
        """Run later calls on `n` OpenMP threads (n >= 1)."""
        self.check_thread_count(n)
        self._lib.tf_set_num_threads(n)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Execute the model on `{input name: array}`; returns `{output name: array}`, arrays
        that no earlier result still refers to (see compiler/runtime/outputs.py)."""
        arrays = check_inputs(self._inputs, inputs)
        with self._lock:
            return self._run_locked(arrays)

    def _run_locked(self, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
        """`run` on checked inputs, its caller holding the lock."""
        outputs = self._out_buffers.take()
        for i, a in enumerate(arrays):
            self._in_ptrs[i] = data_address(a)
        for i, (_, address) in enumerate(outputs):
            self._out_ptrs[i] = address
        rc = self._run(self._in_ptrs, self._out_ptrs, self._weights_ptr, self._arena_ptr)
        if rc != 0:
            why = "a buffer pointer was null" if rc == RUN_NULL_POINTER else "unknown error"
            raise ArtifactError(f"model entry point failed with code {rc} ({why})")
        return {s.name: a for s, (a, _) in zip(self._outputs, outputs, strict=True)}

    @property
    def profiles_in_run(self) -> bool:
        """Whether the library times its kernels inside a run (`kernel_times`): artifacts
        built before that was added do not."""
        return self._profile is not None

    def kernel_times(self, inputs: Mapping[str, Any], runs: int = 20, warmup: int = 2) -> dict[str, list[float]]:
        """Milliseconds of each kernel inside the model's own runs on `inputs`:
        `{symbol: [ms of each call of it in each run]}`. Every thread stamps the clock after
        each kernel it calls and after each wave's barrier; a wave's time (thread 0's, from
        barrier to barrier, the wait included) is shared among its kernels as the threads'
        time in each, summed (one kernel: all of it)."""
        if self._profile is None:
            raise ArtifactError(f"this artifact's {LIBRARY} was built without in-run profiling; compile it again")
        arrays = check_inputs(self._inputs, inputs)
        switch, team, read, symbol = self._profile
        times: dict[str, list[float]] = {}
        with self._lock:  # no other run may stamp between a run and the reading of its stamps
            count = switch(1)
            try:
                names = [(symbol(i) or b"").decode("ascii") for i in range(count)]
                for n in range(warmup + runs):
                    self._run_locked(arrays)
                    if n < warmup:
                        continue
                    stamps = (ctypes.c_double * (count * team()))()
                    got = read(stamps, len(stamps))
                    rows = np.frombuffer(stamps, np.float64)[:got].reshape(-1, count)
                    for name, ms in _wave_shares(names, rows):
                        times.setdefault(name, []).append(ms)
            finally:
                switch(0)
        return times


def _wave_shares(names: list[str], stamps: np.ndarray) -> list[tuple[str, float]]:
    """(symbol, ms) of each kernel call from one run's stamps, a row per thread (see
    `kernel_times`)."""
    out: list[tuple[str, float]] = []
    start = 0
    for end in (i for i, name in enumerate(names) if i and not name):  # each wave's barrier stamp
        calls = [(names[i], float(np.sum(stamps[:, i] - stamps[:, i - 1]))) for i in range(start + 1, end)]
        spent = sum(t for _, t in calls)
        wave = float(stamps[0, end] - stamps[0, start])
        out += [(name, 1e3 * wave * (t / spent if spent > 0 else 1 / len(calls))) for name, t in calls]
        start = end
    return out


def _byte_count(manifest: Mapping[str, Any], key: str) -> int:
    value = manifest.get(key)
    if not isinstance(value, int) or value < 0:
        raise ArtifactError(f"artifact manifest has a bad {key}: {value!r}")
    return value


def _read_weights(path: Path, nbytes: int, given: bytes | memoryview | None) -> np.ndarray:
    """The weights in aligned memory: `given` (weights.bin's bytes, which the caller holds),
    taken as they are where they are aligned and copied where not, or else weights.bin
    read from `path`."""
    held = (path.stat().st_size if path.exists() else None) if given is None else len(given)
    if held != nbytes:
        raise ArtifactError(f"artifact's {WEIGHTS} must hold {nbytes} bytes")
    if given is not None and nbytes:
        view = np.frombuffer(given, np.uint8)
        return view if view.ctypes.data % ALIGNMENT == 0 else copy_aligned(view)
    blob = aligned_empty((max(nbytes, 1),), np.uint8)
    if given is None:
        with path.open("rb") as f:
            f.readinto(memoryview(blob)[:nbytes])
    return blob


def check_host(manifest: Mapping[str, Any], host: CpuFacts | None = None) -> None:
    """Refuse, naming what is missing, an artifact built for a machine or ISA features that
    this host (or `host`) lacks."""
    machine, features = manifest.get(MACHINE_KEY), manifest.get(FEATURES_KEY)
    if machine is None and features is None:
        return  # written before artifacts recorded their ISA
    if not isinstance(machine, str) or not isinstance(features, list) \
            or not all(isinstance(f, str) for f in features):
        raise ArtifactError(f"artifact manifest has a bad {MACHINE_KEY} / {FEATURES_KEY}")
    missing = host_lacks(machine, features, host)
    if missing:
        raise HostMismatchError(f"this artifact was built for target {manifest.get('target', '?')}, whose "
                                f"instructions this host's CPU lacks: {', '.join(missing)}; compile it for a "
                                f"target this host runs (`tileforge targets` marks them) or run it on such "
                                f"a machine")


def _open_library(path: Path) -> ctypes.CDLL:
    """dlopen the model and check its entry points and ABI version."""
    if not path.exists():
        raise ArtifactError(f"artifact has no {LIBRARY}")
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        run, version, threads, prepare = lib.tf_run, lib.tf_abi_version, lib.tf_set_num_threads, lib.tf_prepare
    except (OSError, AttributeError) as e:
        raise ArtifactError(f"artifact's {LIBRARY} cannot be loaded: {e}") from e
    version.argtypes, version.restype = [], ctypes.c_int
    if version() != ABI_VERSION:
        raise ArtifactError(f"artifact's entry ABI is version {version()}, this runtime runs {ABI_VERSION}")
    run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
                    ctypes.c_void_p, ctypes.c_void_p]
    run.restype = ctypes.c_int
    threads.argtypes, threads.restype = [ctypes.c_int], ctypes.c_int
    prepare.argtypes, prepare.restype = [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
    return lib


def _profile_functions(lib: ctypes.CDLL) -> tuple[Any, Any, Any, Any] | None:
    """The in-run profiling entry points (compiler/codegen/c/entry.py), or None where the
    library predates them."""
    try:
        switch, team = lib.tf_profile, lib.tf_profile_threads
        read, symbol = lib.tf_profile_read, lib.tf_profile_symbol
    except AttributeError:
        return None
    switch.argtypes, switch.restype = [ctypes.c_int], ctypes.c_int
    team.argtypes, team.restype = [], ctypes.c_int
    read.argtypes, read.restype = [ctypes.POINTER(ctypes.c_double), ctypes.c_int], ctypes.c_int
    symbol.argtypes, symbol.restype = [ctypes.c_int], ctypes.c_char_p
    return switch, team, read, symbol
