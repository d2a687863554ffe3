"""Runs a CUDA artifact on an NVIDIA GPU through pycuda (the optional `cuda` extra).

The artifact holds `model.cubin` (every kernel, one module), `weights.bin`, and
in its manifest the buffers and, under `MANIFEST_LAUNCHES`, each wave's launches
(symbol, argument buffer ids, grid, block). Loading creates the device memory
once: the arena, the weights (uploaded once), and one buffer per model input and
output. `run` uploads the inputs, launches the kernels wave by wave and
downloads the outputs. A wave's kernels are mutually independent (Rammer's
waves), so kernel i of a wave goes to stream i and they may run side by side;
between waves, every stream waits for the events the previous wave recorded.

pycuda is imported only here, and only when a CUDA artifact is loaded; without
it, or without a GPU, loading raises ArtifactError saying what is missing.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from compiler.abi import MANIFEST_LAUNCHES
from compiler.aligned import aligned_empty
from compiler.errors import ArtifactError
from compiler.runtime.artifact import WEIGHTS
from compiler.runtime.cuda_graph import CudaGraph, GraphError
from compiler.runtime.executable import (
    LoadedArtifact,
    check_inputs,
    specs_from_manifest,
)

CUBIN = "model.cubin"
INSTALL_HINT = "install the `cuda` extra: pip install -e '.[cuda]' (see docs/CUDA.md)"


@dataclass(frozen=True)
class _Launch:
    symbol: str
    args: tuple[int, ...]  # buffer ids, output first
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    function: Any = None  # the prepared pycuda Function, once the module is loaded


def load_extracted(manifest: Mapping[str, Any], folder: Path,
                   weights: bytes | memoryview | None = None) -> CudaExecutable:
    """Load a verified, extracted CUDA artifact (reads everything before returning);
    `weights`, where given, are weights.bin's bytes (see compiler.runtime.load_folder)."""
    return CudaExecutable(manifest, folder, weights=weights)


def cuda_driver() -> Any:
    """pycuda.driver, initialised, with at least one device; ArtifactError otherwise."""
    try:
        import pycuda.driver as drv
    except ImportError as e:
        raise ArtifactError(f"running a CUDA artifact needs pycuda, which is not installed: "
                            f"{INSTALL_HINT}") from e
    try:
        drv.init()
        count = drv.Device.count()
    except drv.Error as e:
        raise ArtifactError(f"running a CUDA artifact needs an NVIDIA GPU and its driver: {e}") from e
    if count == 0:
        raise ArtifactError("running a CUDA artifact needs an NVIDIA GPU; the driver finds none")
    return drv


def device_target(device: int = 0) -> str:
    """The `cuda:` target name for this machine's GPU `device` (`preset_for_device`).
    ArtifactError when there is no usable GPU."""
    from compiler.target.cuda import preset_for_device

    dev = cuda_driver().Device(device)
    return preset_for_device(dev.name(), dev.compute_capability())


class CudaExecutable(LoadedArtifact):
    """A loaded CUDA artifact on device 0: device memory and kernels ready to launch."""

    def __init__(self, manifest: Mapping[str, Any], folder: Path, device: int = 0,
                 weights: bytes | memoryview | None = None) -> None:
        self._inputs = specs_from_manifest(manifest, "inputs")
        self._outputs = specs_from_manifest(manifest, "outputs")
        self._input_ids = _io_buffer_ids(manifest, "inputs")
        self._output_ids = _io_buffer_ids(manifest, "outputs")
        buffers = _buffers(manifest)
        nbytes = _byte_count(manifest, "weights_bytes")
        if weights is None:
            weights = _read_file(folder / WEIGHTS, nbytes)
        elif len(weights) != nbytes:
            raise ArtifactError(f"artifact's {WEIGHTS} must hold {nbytes} bytes, has {len(weights)}")
        arena_bytes = _byte_count(manifest, "arena_bytes")
        cubin = _read_file(folder / CUBIN, None)
        waves = _launches(manifest, buffers)

        drv = cuda_driver()
        self._drv = drv
        dev = drv.Device(device)
        _check_arch(str(manifest.get("target_fingerprint", "")), dev.compute_capability())
        self._context = dev.retain_primary_context()
        self._context.push()
        try:
            try:
                module = drv.module_from_buffer(cubin)
            except drv.Error as e:
                raise ArtifactError(f"the artifact's {CUBIN} does not load on this GPU: {e}") from e
            self._memory = [drv.mem_alloc(max(1, arena_bytes)), drv.mem_alloc(max(1, len(weights)))]
            arena, weights_dev = (int(m) for m in self._memory)
            if weights:
                drv.memcpy_htod(weights_dev, weights)
            io = {}
            for b in (*self._input_ids, *self._output_ids):
                io[b] = drv.mem_alloc(max(1, buffers[b]["nbytes"]))
                self._memory.append(io[b])
            self._pointers = {}
            for b, entry in buffers.items():
                kind = entry["kind"]
                self._pointers[b] = (int(io[b]) if b in io else
                                     weights_dev + entry["offset"] if kind == "weight" else
                                     arena + entry["offset"])
            self._waves = [[_prepare(module, drv, launch) for launch in wave] for wave in waves]
            width = max((len(w) for w in waves), default=1)
            self._streams = [drv.Stream() for _ in range(width)]
            self._events = [drv.Event(drv.event_flags.DISABLE_TIMING) for _ in range(width)]
            self._fork = drv.Event(drv.event_flags.DISABLE_TIMING)
            self._joins = [drv.Event(drv.event_flags.DISABLE_TIMING) for _ in range(width)]
            self._graph, self.graph_note = self._capture()
        finally:
            drv.Context.pop()
        self._lock = threading.Lock()  # one arena: runs of one executable take turns
        if self._graph is not None:
            weakref.finalize(self, _release_graph, self._context, self._graph)

    def _capture(self) -> tuple[CudaGraph | None, str]:
        """The launch table recorded as a CUDA graph, or (None, why not): the runtime then
        launches kernel by kernel, which computes the same, only with more launch latency."""
        try:
            return CudaGraph(self._streams[0].handle, self._enqueue_launches), ""
        except (GraphError, OSError, self._drv.Error) as e:
            return None, f"launching kernel by kernel: {e}"

    def set_threads(self, n: int) -> None:
        """Accepted for interface parity with the CPU runtime; the GPU ignores it."""
        self.check_thread_count(n)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Execute the model on `{input name: array}`; returns fresh `{output name: array}`."""
        arrays = check_inputs(self._inputs, inputs)
        outputs = [aligned_empty(s.shape, s.np_dtype) for s in self._outputs]
        drv = self._drv
        with self._lock:
            self._context.push()
            try:
                self._upload(arrays)
                self._execute()
                drv.Context.synchronize()
                for b, out in zip(self._output_ids, outputs, strict=True):
                    if out.nbytes:
                        drv.memcpy_dtoh(out, self._pointers[b])
            except drv.Error as e:
                raise ArtifactError(f"a kernel of the CUDA artifact failed: {e}") from e
            finally:
                drv.Context.pop()
        return {s.name: a for s, a in zip(self._outputs, outputs, strict=True)}

    def device_times(self, inputs: Mapping[str, Any], runs: int = 50, warmup: int = 5) -> list[float]:
        """Milliseconds of each of `runs` executions after `warmup` ones, the inputs already
        on the device: CUDA events around one execution as `run` launches it (the graph,
        or kernel by kernel), without the copies in and out."""
        return self._timed(inputs, runs, warmup, per_kernel=False)[""]

    def kernel_times(self, inputs: Mapping[str, Any], runs: int = 20, warmup: int = 2) -> dict[str, list[float]]:
        """Milliseconds of each kernel, launched one at a time between CUDA events:
        `{symbol: [ms of each launch of it in each run]}` (a kernel that computes several
        identical nodes is launched once per node; kernels of a wave do not overlap here)."""
        return self._timed(inputs, runs, warmup, per_kernel=True)

    def _timed(self, inputs: Mapping[str, Any], runs: int, warmup: int,
               per_kernel: bool) -> dict[str, list[float]]:
        arrays = check_inputs(self._inputs, inputs)
        drv = self._drv
        times: dict[str, list[float]] = {}
        with self._lock:
            self._context.push()
            try:
                self._upload(arrays)
                stream = self._streams[0]
                marks = [drv.Event() for _ in range(2)]
                steps = ([(launch.symbol, [launch]) for wave in self._waves for launch in wave]
                         if per_kernel else [("", None)])
                for n in range(warmup + runs):
                    for name, launches in steps:
                        marks[0].record(stream)
                        if launches is None:
                            self._execute()
                        else:
                            self._launch(stream, launches[0])
                        marks[1].record(stream)
                        marks[1].synchronize()
                        if n >= warmup:
                            times.setdefault(name, []).append(marks[1].time_since(marks[0]))
            except drv.Error as e:
                raise ArtifactError(f"a kernel of the CUDA artifact failed: {e}") from e
            finally:
                drv.Context.pop()
        return times

    def _upload(self, arrays: list[np.ndarray]) -> None:
        for b, a in zip(self._input_ids, arrays, strict=True):
            if a.nbytes:
                self._drv.memcpy_htod(self._pointers[b], a)

    def _execute(self) -> None:
        """Enqueue one execution on stream 0: the graph's replay, or the launches themselves."""
        if self._graph is not None:
            self._graph.launch(self._streams[0].handle)
        else:
            self._enqueue_launches()

    def _enqueue_launches(self) -> None:
        """Each wave's kernels on their own streams, each wave after the previous one. The
        other streams start after an event of stream 0 and stream 0 ends after all of
        theirs (CUDA's fork/join, which graph capture requires)."""
        origin = self._streams[0]
        self._fork.record(origin)
        done: list[Any] = [self._fork]  # events recorded at the end of the previous wave
        for wave in self._waves:
            for stream, launch in zip(self._streams, wave, strict=False):
                for event in done:
                    stream.wait_for_event(event)
                self._launch(stream, launch)
            done = self._events[:len(wave)]
            for event, stream in zip(done, self._streams, strict=False):
                event.record(stream)
        for event, stream in zip(self._joins[1:], self._streams[1:], strict=True):
            event.record(stream)
            origin.wait_for_event(event)

    def _launch(self, stream: Any, launch: _Launch) -> None:
        ptrs = [np.uintp(self._pointers[b]) for b in launch.args]
        launch.function.prepared_async_call(launch.grid, launch.block, stream, *ptrs)


def _release_graph(context: Any, graph: CudaGraph) -> None:
    try:
        context.push()
    except Exception:  # the context is gone (interpreter shutdown): so is the graph
        return
    try:
        graph.release()
    finally:
        context.pop()


def _prepare(module: Any, drv: Any, launch: _Launch) -> _Launch:
    try:
        fn = module.get_function(launch.symbol)
    except drv.Error as e:
        raise ArtifactError(f"the artifact's {CUBIN} lacks kernel {launch.symbol!r}") from e
    fn.prepare("P" * len(launch.args))
    return replace(launch, function=fn)


def _check_arch(fingerprint: str, capability: tuple[int, int]) -> None:
    """A cubin for sm_XY runs on compute capability X.Z with Z >= Y (same major)."""
    parts = fingerprint.split(":")
    arch = parts[1] if len(parts) >= 2 and parts[0] == "cuda" else ""
    if _arch_digits(arch) is None:
        raise ArtifactError(f"artifact's target fingerprint {fingerprint!r} names no CUDA arch")
    if not _arch_runs(arch, capability):
        raise ArtifactError(f"artifact is built for {arch}; this GPU is compute capability "
                            f"{capability[0]}.{capability[1]}")


def _arch_digits(arch: str) -> tuple[int, int] | None:
    digits = arch.removeprefix("sm_").rstrip("a")
    if not digits.isdigit() or len(digits) < 2:
        return None
    return int(digits[:-1]), int(digits[-1])


def _arch_runs(arch: str, capability: tuple[int, int]) -> bool:
    need = _arch_digits(arch)
    return need is not None and capability[0] == need[0] and capability[1] >= need[1]


def gpu_runs(arch: str, device: int = 0) -> bool:
    """Whether this machine's GPU `device` runs cubins built for `arch` (False without a
    GPU or pycuda)."""
    try:
        capability = cuda_driver().Device(device).compute_capability()
    except ArtifactError:
        return False
    return _arch_runs(arch, capability)


def _byte_count(manifest: Mapping[str, Any], key: str) -> int:
    value = manifest.get(key)
    if not isinstance(value, int) or value < 0:
        raise ArtifactError(f"artifact manifest has a bad {key}: {value!r}")
    return value


def _read_file(path: Path, nbytes: int | None) -> bytes:
    if not path.exists():
        raise ArtifactError(f"CUDA artifact has no {path.name}")
    data = path.read_bytes()
    if nbytes is not None and len(data) != nbytes:
        raise ArtifactError(f"artifact's {path.name} must hold {nbytes} bytes, has {len(data)}")
    return data


def _buffers(manifest: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    try:
        out = {int(b["id"]): {"kind": str(b["kind"]), "nbytes": int(b["nbytes"]),
                              "offset": int(b["offset"])} for b in manifest["buffers"]}
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"artifact manifest has malformed buffers: {e}") from e
    limits = {"arena": manifest.get("arena_bytes"), "weight": manifest.get("weights_bytes")}
    for b, e in out.items():
        if e["kind"] not in {"input", "output", "weight", "arena"} or e["nbytes"] < 0 or e["offset"] < 0:
            raise ArtifactError(f"artifact manifest has a bad buffer {b}: {e}")
        limit = limits.get(e["kind"])
        if isinstance(limit, int) and e["offset"] + e["nbytes"] > limit:
            raise ArtifactError(f"artifact buffer {b} lies outside its {e['kind']} region")
    return out


def _io_buffer_ids(manifest: Mapping[str, Any], which: str) -> list[int]:
    try:
        return [int(e["buffer"]) for e in manifest[which]]
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"artifact manifest's {which} lack buffer ids: {e}") from e


def _launches(manifest: Mapping[str, Any], buffers: Mapping[int, Any]) -> list[list[_Launch]]:
    """The manifest's launch table, checked: known buffers, positive dims within CUDA's limits."""
    try:
        waves = [[_Launch(str(k["symbol"]), tuple(int(a) for a in k["args"]),
                          _dim3(k["grid"]), _dim3(k["block"])) for k in wave]
                 for wave in manifest[MANIFEST_LAUNCHES]]
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"CUDA artifact manifest has malformed {MANIFEST_LAUNCHES}: {e}") from e
    for launch in (x for wave in waves for x in wave):
        if not launch.args or any(a not in buffers for a in launch.args):
            raise ArtifactError(f"launch of {launch.symbol} names unknown buffers {launch.args}")
        if buffers[launch.args[0]]["kind"] == "weight":
            raise ArtifactError(f"launch of {launch.symbol} writes a weight buffer")
        if any(d < 1 for d in (*launch.grid, *launch.block)) or np.prod(launch.block) > 1024:
            raise ArtifactError(f"launch of {launch.symbol} has a bad shape "
                                f"{launch.grid} x {launch.block}")
    return waves


def _dim3(v: Any) -> tuple[int, int, int]:
    x, y, z = (int(d) for d in v)
    return x, y, z
