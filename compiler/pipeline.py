"""compile_model(): the compiler's stages in order, with progress callbacks.

load -> lower -> partition (register-level connection) -> schedule (rTile
construction, top-k measurement on the device where it is present, keys,
plan) -> codegen (cache misses only) -> build -> package -> validate.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from compiler import frontend
from compiler.cache import (
    KernelCache,
    KernelEntry,
    KernelSignature,
    MemoryKernelCache,
    signature_of,
)
from compiler.errors import ModelError, ValidationError
from compiler.ir.graph import Graph
from compiler.ir.te import Compute
from compiler.options import CompileOptions
from compiler.schedule.fuse import fuse
from compiler.schedule.plan import ExecutionPlan, Kernel, TileConfig
from compiler.schedule.planner import Constants, build_plan, constant_options, weights_blob
from compiler.schedule.rowfuse import fuse_rows, stages_fit
from compiler.schedule.rtile import Candidate, construct
from compiler.stages import STAGES
from compiler.target import get_target
from compiler.target.base import Target
from compiler.target.cpu import host_cannot_run, host_description

# Kernels the model predicts faster than this are not worth timing on the device:
# measurement noise and the extra toolchain run cost more than any difference found.
# A GPU times a kernel in microseconds, where the CPU timer needs tens of them.
MEASURE_THRESHOLD_US = {"cpu": 20.0, "cuda": 2.0}

Progress = Callable[[str, float], None]


@dataclass
class CompileResult:
    """What a compilation produced and how it went."""

    artifact_path: Path
    artifact_sha256: str
    report: dict
    cache_hits: int
    cache_misses: int
    stage_seconds: dict[str, float] = field(default_factory=dict)
    validation: dict = field(default_factory=dict)
    kernels: list[dict] = field(default_factory=list)


class _Stages:
    """Times each stage and reports progress (stage, overall fraction 0..1)."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.progress is not None:
            self.progress(name, STAGES.index(name) / len(STAGES))
        t0 = time.perf_counter()
        yield
        self.seconds[name] = round(time.perf_counter() - t0, 4)


def model_bytes(model: bytes | str | Path | onnx.ModelProto) -> bytes:
    """The serialized model, from bytes, a path or a ModelProto."""
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString()
    if isinstance(model, str | Path):
        try:
            return Path(model).read_bytes()
        except OSError as e:
            raise ModelError(f"cannot read model file: {e.strerror}") from None
    if isinstance(model, bytes | bytearray | memoryview):
        return bytes(model)
    raise ModelError(f"a model must be ONNX bytes, a path or a ModelProto, not {type(model).__name__}")


def compile_model(
    model: bytes | str | Path | onnx.ModelProto,
    target: str | Target = "cpu",
    options: CompileOptions | dict | None = None,
    cache: KernelCache | None = None,
    progress: Progress | None = None,
    output: Path | str | None = None,
) -> CompileResult:
    """Compile an ONNX model for `target` into an artifact that runs and matches onnxruntime.

    Raises ModelError (and subclasses) for problems with the model or options,
    BuildError / ValidationError for problems of ours.
    """
    opts = CompileOptions.from_dict(options) if not isinstance(options, CompileOptions) else options
    tgt = get_target(target) if isinstance(target, str) else target
    if tgt.kind == "cpu" and opts.threads:  # scheduled, modelled and timed for the cores it runs on
        tgt = tgt.with_units(opts.threads)
    c = _Compilation(tgt, opts, cache if cache is not None else MemoryKernelCache())
    st = _Stages(progress)

    with st.stage("load"):
        data = model_bytes(model)
        model_sha = hashlib.sha256(data).hexdigest()
    with st.stage("lower"):
        graph = frontend.import_model(data, input_shapes=opts.input_shapes)
    with st.stage("partition"):
        if opts.fuse:
            fuse(graph)
            if tgt.kind == "cpu":
                fuse_rows(graph, min_rows=tgt.units)
            else:  # a row per thread block, its stages in shared memory
                from compiler.codegen.cuda_rows import ROW_STAGE_BYTES

                fuse_rows(graph, fits=stages_fit(ROW_STAGE_BYTES))
    with st.stage("schedule"):
        c.schedule(graph)
    with st.stage("codegen"):
        sources = c.render_misses()
    with st.stage("build"):
        binary = c.build(sources)
    report = c.report(model_sha, graph)
    files = c.artifact_files(graph, binary)
    out = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="tileforge-artifact-")) / "model.tar.gz"
    try:
        with st.stage("package"):
            sha = c.package(out, files, model_sha, report)
        if opts.validate:
            with st.stage("validate"):
                report["validation"] = _validate(data, out, opts, tgt)
                report["stage_seconds"] = dict(st.seconds)
                sha = c.package(out, files, model_sha, report)
            if report["validation"]["passed"] is False:
                raise ValidationError(
                    f"compiled model disagrees with onnxruntime: relative L2 error "
                    f"{report['validation']['rel_l2_error']:.3g} > tolerance {opts.tolerance:g}"
                )
    except BaseException:
        # never leave behind an artifact that did not validate (or was cut short)
        out.unlink(missing_ok=True)
        if output is None:
            shutil.rmtree(out.parent, ignore_errors=True)
        raise
    c.store(report.get("validation", {}))
    report["stage_seconds"] = dict(st.seconds)
    if progress is not None:
        progress("done", 1.0)
    return CompileResult(
        artifact_path=out, artifact_sha256=sha, report=report,
        cache_hits=report["cache_hits"], cache_misses=report["cache_misses"],
        stage_seconds=dict(st.seconds), validation=report.get("validation", {}),
        kernels=report["kernels"],
    )


class _Compilation:
    """The state of one compilation between stages: plan, cache entries, candidates."""

    def __init__(self, target: Target, opts: CompileOptions, cache: KernelCache) -> None:
        self.target, self.opts, self.cache = target, opts, cache
        self.fingerprint = target.fingerprint()
        self.entries: dict[str, KernelEntry] = {}  # key -> cached or newly built kernel
        self.signatures: dict[str, KernelSignature] = {}
        self.candidates: dict[str, list[Candidate]] = {}  # key -> ranked tilings of a miss
        self.measured: dict[str, list[float | None]] = {}  # key -> per-candidate microseconds
        self.construct_seconds = 0.0
        self.plan = ExecutionPlan(target=self.fingerprint)
        self.new_entries: list[KernelEntry] = []  # built here, cached once the model validates

    # -- schedule -----------------------------------------------------------------------------

    def key_of(self, compute: Compute, constants: Constants = ()) -> str:
        sig = signature_of(compute, self.fingerprint, {**self.opts.codegen_key(), **constant_options(constants)})
        if sig.key not in self.signatures:
            self.signatures[sig.key] = sig
            hit = self.cache.get(sig.key)
            if hit is not None:
                self.entries[sig.key] = hit
        return sig.key

    def tile_of(self, compute: Compute, constants: Constants = ()) -> TileConfig:
        key = self.key_of(compute, constants)
        if key in self.entries:
            return TileConfig.from_json(self.entries[key].tile_config)
        if key not in self.candidates:
            t0 = time.perf_counter()
            self.candidates[key] = construct(compute, self.target, top_k=self._top_k())
            self.construct_seconds += time.perf_counter() - t0
        return self.candidates[key][0].tile

    def _top_k(self) -> int:
        return self.opts.top_k if self.opts.measure and self._device_present() else 1

    def _device_present(self) -> bool:
        """Whether this machine runs the target's kernels: a CPU target this host runs, or
        a CUDA target whose cubins this machine's GPU runs."""
        if self.cuda:
            from compiler.runtime.cuda import gpu_runs

            return gpu_runs(self.target.arch)
        return not host_cannot_run(self.target)

    def schedule(self, graph: Graph) -> None:
        self.plan = build_plan(graph, self.fingerprint, self.tile_of, self.key_of)
        self._measure_candidates()
        for k in self.plan.kernels:
            k.cache_hit = k.key in self.entries
            if k.cache_hit:
                e = self.entries[k.key]
                k.estimated_us, k.measured_us = e.estimated_us, e.measured_us
                continue
            best = self._best(k.key)
            cand = self.candidates[k.key][best]
            k.tile = cand.tile
            k.estimated_us = round(cand.estimate.time_us, 3)
            times = self.measured.get(k.key)
            k.measured_us = None if times is None else times[best]
        if not self.cuda:
            from compiler.codegen.c_prepack import place_prepacked

            place_prepacked(self.plan, self.target)

    def _best(self, key: str) -> int:
        times = self.measured.get(key)
        if not times:
            return 0
        return min(range(len(times)), key=lambda i: times[i] if times[i] is not None else float("inf"))

    def _measure_candidates(self) -> None:
        """Compile and time the top-k tilings of every heavy miss; the fastest is kept."""
        threshold = MEASURE_THRESHOLD_US[self.target.kind]
        todo = {key: cands for key, cands in self.candidates.items()
                if len(cands) > 1 and max(c.estimate.time_us for c in cands) >= threshold}
        if not todo:
            return
        kernels = {k.key: k for k in self.plan.kernels}
        if self.cuda:
            self._measure_on_gpu(todo, kernels)
            return
        from compiler.build.gcc import c_flags, compile_objects, link_shared
        from compiler.codegen.c import prepacked_inputs, render_kernel
        from compiler.runtime.kernel_timer import time_kernels

        sources = {f"tf_cand_{key[:16]}_{i}": render_kernel(kernels[key].compute, c.tile, f"tf_cand_{key[:16]}_{i}",
                                                            self.target, kernels[key].constant_inputs)
                   for key, cands in todo.items() for i, c in enumerate(cands)}
        flags = c_flags(self.target)
        objects = compile_objects(sources, flags)
        library = link_shared(list(objects.values()), {}, flags)
        for key, cands in todo.items():
            symbols = [f"tf_cand_{key[:16]}_{i}" for i in range(len(cands))]
            k = kernels[key]
            # Candidates read their packed operands as laid out for their own tiles: the
            # timer passes each such input as much memory as the largest layout needs.
            packed: dict[int, int] = {}
            for c in cands:
                for pos, nbytes in prepacked_inputs(k.compute, c.tile, self.target, k.constant_inputs).items():
                    packed[pos] = max(packed.get(pos, 0), nbytes)
            times = time_kernels(library, symbols, k.compute, self.opts.threads, packed)
            self.measured[key] = [round(times[s], 3) for s in symbols]

    def _measure_on_gpu(self, todo: dict[str, list[Candidate]], kernels: dict[str, Kernel]) -> None:
        """The CUDA side of `_measure_candidates`: each kernel's candidates in one cubin
        (built side by side, one nvcc per kernel), timed one after another on the GPU."""
        from concurrent.futures import ThreadPoolExecutor

        from compiler.build.nvcc import compile_cubin
        from compiler.codegen.cuda import launch_dims, render_kernel
        from compiler.runtime.cuda_timer import time_cuda_kernels

        def symbols(key: str) -> list[str]:
            return [f"tf_cand_{key[:16]}_{i}" for i in range(len(todo[key]))]

        def build(key: str) -> bytes:
            c = kernels[key].compute
            return compile_cubin("\n".join(render_kernel(c, cand.tile, sym)
                                           for cand, sym in zip(todo[key], symbols(key), strict=True)),
                                 self.target.arch)

        with ThreadPoolExecutor(max(1, min(len(todo), os.cpu_count() or 1))) as pool:
            cubins = dict(zip(todo, pool.map(build, todo), strict=True))
        for key, cands in todo.items():
            c = kernels[key].compute
            launches = [(sym, *launch_dims(c, cand.tile)) for cand, sym in zip(cands, symbols(key), strict=True)]
            times = time_cuda_kernels(cubins[key], launches, c)
            self.measured[key] = [round(times[s], 3) for s in symbols(key)]

    # -- codegen and build --------------------------------------------------------------------

    def _misses(self) -> dict[str, Kernel]:
        out: dict[str, Kernel] = {}
        for k in self.plan.kernels:
            if k.key not in self.entries and k.key not in out:
                out[k.key] = k
        return out

    @property
    def cuda(self) -> bool:
        return self.target.kind == "cuda"

    def render_misses(self) -> dict[str, str]:
        """Generated source of every kernel not in the cache (symbol -> source)."""
        if self.cuda:
            from compiler.codegen.cuda import render_kernel

            return {k.symbol: render_kernel(k.compute, k.tile, k.symbol) for k in self._misses().values()}
        from compiler.codegen.c import render_kernel

        return {k.symbol: render_kernel(k.compute, k.tile, k.symbol, self.target, k.constant_inputs)
                for k in self._misses().values()}

    def build(self, sources: dict[str, str]) -> bytes:
        """Compile the misses (kept for `store`); returns the model's binary.

        CPU: one object per kernel (cached), linked with the entry point into model.so.
        CUDA: kernels are cached as tiling + source; the model's kernels are compiled
        together into one module (model.cubin) for the target's architecture.
        """
        objects: dict[str, bytes] = {}
        if sources and not self.cuda:
            from compiler.build.gcc import c_flags, compile_objects

            objects = compile_objects(sources, c_flags(self.target))
        for key, k in self._misses().items():
            entry = KernelEntry(
                signature=self.signatures[key], tile_config=k.tile.to_json(),
                source=sources[k.symbol], binary=objects.get(k.symbol, b""),
                te_json=k.compute.canonical(), estimated_us=k.estimated_us, measured_us=k.measured_us,
                extras={"candidates": self._candidate_log(key)},
            )
            self.new_entries.append(entry)
            self.entries[key] = entry
        if self.cuda:
            from compiler.build.nvcc import compile_cubin
            from compiler.codegen.cuda import render_module

            return compile_cubin(render_module(self.plan), self.target.arch)
        from compiler.build.gcc import c_flags, link_shared
        from compiler.codegen.c_entry import render_entry

        keys = sorted({k.symbol: k.key for k in self.plan.kernels}.items())
        return link_shared([self.entries[key].binary for _, key in keys],
                           {"entry": render_entry(self.plan)}, c_flags(self.target))

    def store(self, validation: dict) -> None:
        """Cache the kernels built here, now that the model they belong to is accepted.

        Called only after validation passed (or was not asked for / could not run): a
        kernel of a model that disagrees with the reference never enters the cache.
        Each carries the relative L2 error of the validation that accepted it.
        """
        for entry in self.new_entries:
            entry.validation_error = validation.get("rel_l2_error")
            if validation.get("passed") is None and validation.get("skipped"):
                entry.extras["not_validated"] = validation["skipped"]
            self.cache.put(entry)

    def _candidate_log(self, key: str) -> list[dict]:
        """Predicted beside measured time of each candidate, so the model can be checked."""
        times = self.measured.get(key) or [None] * len(self.candidates.get(key, []))
        return [{"tile": c.tile.to_json(), "estimated_us": round(c.estimate.time_us, 3),
                 "bound": c.estimate.bound, "measured_us": t}
                for c, t in zip(self.candidates.get(key, []), times, strict=True)]

    # -- package ------------------------------------------------------------------------------

    def report(self, model_sha: str, graph: Graph) -> dict:
        kernels = [{"symbol": k.symbol, "key": k.key, "op_pattern": k.compute.label,
                    "ops": list(k.ops), "tile": k.tile.to_json(), "estimated_us": k.estimated_us,
                    "measured_us": k.measured_us, "cache_hit": k.cache_hit,
                    "candidates": self._candidate_log(k.key) if not k.cache_hit else []}
                   for k in self.plan.kernels]
        return {
            "model_sha256": model_sha, "target": self.target.name, "kernels": kernels,
            "cache_hits": sum(k.cache_hit for k in self.plan.kernels),
            "cache_misses": sum(not k.cache_hit for k in self.plan.kernels),
            "construct_seconds": round(self.construct_seconds, 4),
            "options": self.opts.to_dict(),
            "inputs": [graph.tensors[t].name for t in graph.inputs],
            "outputs": [graph.tensors[t].name for t in graph.outputs],
        }

    def artifact_files(self, graph: Graph, binary: bytes) -> dict[str, bytes]:
        ext = "cu" if self.cuda else "c"
        files = {f"src/{k.symbol}.{ext}": self.entries[k.key].source.encode() for k in self.plan.kernels}
        if self.cuda:
            files["model.cubin"] = binary
        else:
            from compiler.codegen.c_entry import render_entry

            files["src/entry.c"] = render_entry(self.plan).encode()
            files["model.so"] = binary
        files["weights.bin"] = weights_blob(graph, self.plan)
        return files

    def package(self, out: Path, files: dict[str, bytes], model_sha: str, report: dict) -> str:
        from compiler.package import write_artifact

        extra: dict = {"target": self.target.name, "target_fingerprint": self.fingerprint,
                       "toolchain": self.target.toolchain, "model_sha256": model_sha,
                       "target_kind": self.target.kind}
        if self.cuda:
            from compiler.abi import MANIFEST_LAUNCHES
            from compiler.codegen.cuda import launch_table

            extra[MANIFEST_LAUNCHES] = launch_table(self.plan)
        else:
            from compiler.runtime.cpu import FEATURES_KEY, MACHINE_KEY

            extra[MACHINE_KEY], extra[FEATURES_KEY] = self.target.arch, sorted(self.target.features)
        return write_artifact(out, self.plan, files, extra, json.loads(json.dumps(report, default=str)))


def _validate(data: bytes, artifact: Path, opts: CompileOptions, target: Target) -> dict:
    """Run the artifact against onnxruntime on this host, and say where. An artifact this
    host cannot run (a CPU target's ISA it lacks, a GPU where none is present) is recorded
    as not validated (passed None, with the reason), never as passed."""
    from compiler.errors import ArtifactError
    from compiler.runtime import load
    from compiler.runtime.validate import validate

    not_run = {"passed": None, "max_abs_error": None, "rel_l2_error": None, "tolerance": opts.tolerance}
    missing = host_cannot_run(target) if target.kind == "cpu" else []
    if missing:
        return {**not_run, "skipped": f"not validated on this ISA: this host ({host_description()}) "
                                      f"lacks {', '.join(missing)}"}
    try:
        exe = load(artifact)
    except ArtifactError as e:
        if target.kind != "cuda":
            raise
        return {**not_run, "skipped": f"not run: {e}"}
    if opts.threads:
        exe.set_threads(opts.threads)
    return {**validate(data, exe, seed=opts.seed, tolerance=opts.tolerance), "validated_on": host_description()}
