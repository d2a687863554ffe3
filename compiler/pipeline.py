"""compile_model(): the compiler's stages in order, with progress callbacks.

load -> lower -> partition (register-level connection) -> schedule (tiles,
keys, plan) -> codegen (cache misses only) -> build -> package -> validate.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from compiler import frontend
from compiler.cache import KernelCache, KernelEntry, MemoryKernelCache, signature_of
from compiler.errors import ModelError, ValidationError
from compiler.ir.graph import Graph
from compiler.options import CompileOptions
from compiler.schedule.fuse import fuse
from compiler.schedule.plan import ExecutionPlan, Kernel, TileConfig
from compiler.schedule.planner import build_plan, weights_blob
from compiler.target import get_target
from compiler.target.base import Target

STAGES = ("load", "lower", "partition", "schedule", "codegen", "build", "package", "validate")

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


def _model_bytes(model: bytes | str | Path | onnx.ModelProto) -> bytes:
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
    output: Path | None = None,
) -> CompileResult:
    """Compile an ONNX model for `target` into an artifact that runs and matches onnxruntime.

    Raises ModelError (and subclasses) for problems with the model or options,
    BuildError / ValidationError for problems of ours.
    """
    opts = CompileOptions.from_dict(options) if not isinstance(options, CompileOptions) else options
    tgt = get_target(target) if isinstance(target, str) else target
    cache = cache if cache is not None else MemoryKernelCache()
    st = _Stages(progress)

    with st.stage("load"):
        data = _model_bytes(model)
        model_sha = hashlib.sha256(data).hexdigest()
    with st.stage("lower"):
        graph = frontend.import_model(data, input_shapes=opts.input_shapes)
        io_names = _io_names(graph)
    with st.stage("partition"):
        if opts.fuse:
            fuse(graph)
    with st.stage("schedule"):
        plan, entries = _schedule(graph, tgt, opts, cache)
    with st.stage("codegen"):
        sources = _render_misses(plan, entries, tgt)
    with st.stage("build"):
        binary = _build(plan, entries, sources, tgt, cache)
    workdir = Path(tempfile.mkdtemp(prefix="tileforge-"))
    try:
        out = Path(output) if output is not None else workdir / "model.tar.gz"
        kernels = _kernel_report(plan)
        report = {"model_sha256": model_sha, "target": tgt.name, "kernels": kernels,
                  "cache_hits": sum(k.cache_hit for k in plan.kernels),
                  "cache_misses": sum(not k.cache_hit for k in plan.kernels),
                  "options": opts.to_dict(), "io_names": io_names}
        files = _artifact_files(graph, plan, entries, binary)
        with st.stage("package"):
            sha = _package(out, plan, files, tgt, model_sha, report)
        validation: dict = {}
        with st.stage("validate"):
            if opts.validate:
                validation = _validate(data, out, opts)
                report["validation"] = validation
                report["stage_seconds"] = dict(st.seconds)
                sha = _package(out, plan, files, tgt, model_sha, report)
                if not validation["passed"]:
                    raise ValidationError(
                        f"compiled model disagrees with onnxruntime: relative L2 error "
                        f"{validation['rel_l2_error']:.3g} > tolerance {opts.tolerance:g}"
                    )
        report["stage_seconds"] = dict(st.seconds)
        if output is None:
            final = Path(tempfile.mkdtemp(prefix="tileforge-artifact-")) / "model.tar.gz"
            shutil.move(out, final)
            out = final
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if progress is not None:
        progress("done", 1.0)
    return CompileResult(
        artifact_path=out, artifact_sha256=sha, report=report,
        cache_hits=report["cache_hits"], cache_misses=report["cache_misses"],
        stage_seconds=dict(st.seconds), validation=validation, kernels=kernels,
    )


def _io_names(graph: Graph) -> dict:
    return {"inputs": [graph.tensors[t].name for t in graph.inputs],
            "outputs": [graph.tensors[t].name for t in graph.outputs]}


def _schedule(
    graph: Graph, tgt: Target, opts: CompileOptions, cache: KernelCache
) -> tuple[ExecutionPlan, dict[str, KernelEntry]]:
    """Plan the graph; a cached kernel brings its tiling, a new one is tiled by construction."""
    from compiler.schedule.tiling import default_tile

    fp = tgt.fingerprint()
    entries: dict[str, KernelEntry] = {}
    sigs = {}

    def key_of(compute) -> str:
        sig = signature_of(compute, fp, opts.codegen_key())
        sigs[sig.key] = sig
        if sig.key not in entries:
            hit = cache.get(sig.key)
            if hit is not None:
                entries[sig.key] = hit
        return sig.key

    def tile_of(compute) -> TileConfig:
        key = key_of(compute)
        if key in entries:
            return TileConfig.from_json(entries[key].tile_config)
        return default_tile(compute, tgt)

    plan = build_plan(graph, fp, tile_of, key_of)
    for k in plan.kernels:
        k.cache_hit = k.key in entries
        if k.cache_hit:
            k.estimated_us = entries[k.key].estimated_us
            k.measured_us = entries[k.key].measured_us
    plan.signatures = sigs  # type: ignore[attr-defined]
    return plan, entries


def _unique_misses(plan: ExecutionPlan, entries: dict[str, KernelEntry]) -> dict[str, Kernel]:
    out: dict[str, Kernel] = {}
    for k in plan.kernels:
        if k.key not in entries and k.key not in out:
            out[k.key] = k
    return out


def _render_misses(plan: ExecutionPlan, entries: dict[str, KernelEntry], tgt: Target) -> dict[str, str]:
    """Generated source of every kernel not in the cache (symbol -> source)."""
    from compiler.codegen.c import render_kernel

    return {k.symbol: render_kernel(k.compute, k.tile, k.symbol)
            for k in _unique_misses(plan, entries).values()}


def _build(
    plan: ExecutionPlan, entries: dict[str, KernelEntry], sources: dict[str, str],
    tgt: Target, cache: KernelCache,
) -> bytes:
    """Compile the misses (and store them in the cache), link everything with the entry point."""
    from compiler.build.gcc import c_flags, compile_objects, link_shared
    from compiler.codegen.c_entry import render_entry

    flags = c_flags(tgt)
    objects = compile_objects(sources, flags) if sources else {}
    for key, k in _unique_misses(plan, entries).items():
        entry = KernelEntry(
            signature=plan.signatures[key],  # type: ignore[attr-defined]
            tile_config=k.tile.to_json(), source=sources[k.symbol], binary=objects[k.symbol],
            te_json=k.compute.canonical(), estimated_us=k.estimated_us, measured_us=k.measured_us,
        )
        cache.put(entry)
        entries[key] = entry
    symbols = sorted({k.symbol: k.key for k in plan.kernels}.items())
    return link_shared([entries[key].binary for _, key in symbols],
                       {"entry": render_entry(plan)}, flags)


def _artifact_files(
    graph: Graph, plan: ExecutionPlan, entries: dict[str, KernelEntry], binary: bytes
) -> dict[str, bytes]:
    from compiler.codegen.c_entry import render_entry

    files = {f"src/{k.symbol}.c": entries[k.key].source.encode() for k in plan.kernels}
    files["src/entry.c"] = render_entry(plan).encode()
    files["model.so"] = binary
    files["weights.bin"] = weights_blob(graph, plan)
    return files


def _kernel_report(plan: ExecutionPlan) -> list[dict]:
    return [{"symbol": k.symbol, "key": k.key, "op_pattern": k.compute.label, "ops": list(k.ops),
             "tile": k.tile.to_json(), "estimated_us": k.estimated_us,
             "measured_us": k.measured_us, "cache_hit": k.cache_hit} for k in plan.kernels]


def _package(out: Path, plan: ExecutionPlan, files: dict[str, bytes], tgt: Target,
             model_sha: str, report: dict) -> str:
    from compiler.runtime.artifact import write_artifact

    extra = {"target": tgt.name, "target_fingerprint": tgt.fingerprint(), "toolchain": tgt.toolchain,
             "model_sha256": model_sha, "target_kind": tgt.kind}
    return write_artifact(out, plan, files, extra, json.loads(json.dumps(report, default=str)))


def _validate(data: bytes, artifact: Path, opts: CompileOptions) -> dict:
    from compiler.runtime import load
    from compiler.runtime.validate import validate

    exe = load(artifact)
    if opts.threads:
        exe.set_threads(opts.threads)
    return validate(data, exe, seed=opts.seed, tolerance=opts.tolerance)
