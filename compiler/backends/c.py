"""The C backend: C kernels for a CPU, built with gcc into one shared library (model.so)
with the OpenMP entry point, run through ctypes (compiler/runtime/cpu.py)."""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compiler.backends.base import Backend
from compiler.build.gcc import c_flags, link_shared
from compiler.build.object_memo import ObjectMemo
from compiler.codegen.c.entry import render_entry
from compiler.codegen.c.kernel import render_kernel as render_c
from compiler.ir.graph import Graph
from compiler.ir.te import Compute
from compiler.options import CompileOptions
from compiler.runtime import load
from compiler.runtime.artifact import read_artifact
from compiler.runtime.cpu import FEATURES_KEY, LIBRARY, MACHINE_KEY, CpuExecutable
from compiler.runtime.kernel_timer import KernelCall, time_kernels
from compiler.schedule.cpu_tile import cpu_tile_variants, plan_cpu_tile
from compiler.schedule.measure import Timing
from compiler.schedule.partition import fuse_chains, l2_bytes
from compiler.schedule.plan import ExecutionPlan, Kernel, TileConfig
from compiler.schedule.prepack import place_prepacked, prepacked_inputs
from compiler.schedule.tilegraph.attention import fuse_attention
from compiler.schedule.tilegraph.groups import GroupLog
from compiler.schedule.tilegraph.rows import fuse_rows
from compiler.target.base import Target
from compiler.target.cpu import detect_cpu, host_cannot_run, host_description


class CBackend(Backend):
    kind = "cpu"
    source_suffix = "c"
    measure_threshold_us = 20.0

    def __init__(self) -> None:
        # a backend serves one compilation: what it compiles once (a timed candidate, a
        # group timed against its parts, the winners built) is not compiled again
        self.objects = ObjectMemo()

    def target_for(self, target: Target, opts: CompileOptions) -> Target:
        # scheduled, modelled and timed for the cores it runs on
        return target.with_units(opts.threads) if opts.threads else target

    def split_reductions(self, graph: Graph, target: Target, whole: Collection[int] = ()) -> dict[int, int]:
        # none: a CPU's few cores are filled by any contraction's blocks of rows, and a
        # core walks its reduction in cache-sized chunks already (schedule/reduce_chunk.py)
        return {}

    def partition(self, graph: Graph, target: Target, log: GroupLog | None = None) -> None:
        # attention first: its softmax would otherwise become a row group of its own
        fuse_attention(graph, log)
        # convolution chains first: row groups take neither contractions nor padded reads
        fuse_chains(graph, target, log)
        # blocks of rows are the tasks: fewer rows than cores would leave cores idle
        fuse_rows(graph, min_rows=target.units, log=log)

    def device_present(self, target: Target) -> bool:
        return not host_cannot_run(target)

    def timing_target(self, target: Target) -> Target:
        """This host: a named CPU model's caches are the model's, not those of the machine
        that times (the AVX2 preset says 16 MiB of L3 where a Zen 4 has 32, and ResNet-18's
        512-channel Winograd choice was timed on 2 copies whose weights the L3 held)."""
        return detect_cpu()

    def unrunnable(self, target: Target) -> str | None:
        missing = host_cannot_run(target)
        if not missing:
            return None
        return f"not validated on this ISA: this host ({host_description()}) lacks {', '.join(missing)}"

    def time_candidates(self, timings: Sequence[Timing], target: Target,
                        opts: CompileOptions) -> dict[str, list[float]]:
        # Candidates that render the same kernel (rTiles the GEMM path blocks alike) are
        # built and timed once: `same` maps each symbol to the one that times it.
        sources: dict[str, str] = {}
        same: dict[str, str] = {}
        for t in timings:
            first: dict[str, str] = {}  # the kernel's source, named as its first candidate -> symbol
            name = t.symbols()[0]
            for tile, sym in zip(t.tiles, t.symbols(), strict=True):
                text = render_c(t.kernel.compute, tile, sym, target)
                same[sym] = first.setdefault(text.replace(sym, name), sym)
                if same[sym] == sym:
                    sources[sym] = text
        flags = c_flags(target)
        library = link_shared(list(self.objects.compile(sources, flags).values()), {}, flags)
        calls = []
        for t in timings:
            k = t.kernel
            # Candidates read their packed operands as laid out for their own tiles: the
            # timer passes each such input as much memory as the largest layout needs.
            packed: dict[int, int] = {}
            for tile in t.tiles:
                for pos, nbytes in prepacked_inputs(tile).items():
                    packed[pos] = max(packed.get(pos, 0), nbytes)
            calls += [KernelCall(sym, k.compute, packed) for sym in t.symbols() if sym in sources]
        times = time_kernels(library, calls, opts.threads)
        return {t.key: [times[same[s]] for s in t.symbols()] for t in timings}

    def time_plan(self, plan: ExecutionPlan, artifact: Path, feeds: Mapping[str, np.ndarray],
                  opts: CompileOptions, target: Target) -> dict[str, float]:
        # Inside the model's own runs on its inputs, where the library stamps them: each
        # kernel finds the caches as the kernels before it leave them (timed alone with L2
        # emptied first, MobileNetV2's kernels summed to 114% of the run at 1 thread).
        exe = load(artifact, threads=opts.threads)
        if isinstance(exe, CpuExecutable) and exe.profiles_in_run:
            return {sym: statistics.median(ms) * 1e3 for sym, ms in exe.kernel_times(feeds).items()}
        # Built before that: each kernel of the library called alone on random buffers of
        # its shapes (and its packed regions' sizes), the cores' L2 emptied before each call.
        with tempfile.TemporaryDirectory(prefix="tileforge-profile-") as tmp:
            _, folder = read_artifact(artifact, tmp)
            library = (folder / LIBRARY).read_bytes()
        calls: dict[str, KernelCall] = {}
        for k in plan.kernels:
            packed = {p.input: p.nbytes for p in plan.prepacked if p.kernel == k.id}
            calls.setdefault(k.symbol, KernelCall(k.symbol, k.compute, packed))
        return time_kernels(library, list(calls.values()), opts.threads, l2_bytes(target) * target.units)

    def plan_tile(self, compute: Compute, tile: TileConfig, target: Target,
                  constant_inputs: Sequence[int]) -> TileConfig:
        return plan_cpu_tile(compute, tile, target, constant_inputs)

    def tile_variants(self, compute: Compute, tile: TileConfig, target: Target,
                      constant_inputs: Sequence[int]) -> list[tuple[float, TileConfig]]:
        return cpu_tile_variants(compute, tile, target, constant_inputs)

    def place(self, plan: ExecutionPlan, target: Target) -> None:
        place_prepacked(plan)

    def render_kernel(self, kernel: Kernel, target: Target) -> str:
        return render_c(kernel.compute, kernel.tile, kernel.symbol, target)

    def compile_kernels(self, sources: Mapping[str, str], target: Target) -> dict[str, bytes]:
        """One object per kernel (cached with it), so a cache hit needs no compiler."""
        return self.objects.compile(sources, c_flags(target)) if sources else {}

    def link(self, plan: ExecutionPlan, binaries: Mapping[str, bytes], target: Target) -> bytes:
        return link_shared([binaries[s] for s in sorted(binaries)], {"entry": render_entry(plan)},
                           c_flags(target))

    def artifact_files(self, plan: ExecutionPlan, binary: bytes) -> dict[str, bytes]:
        return {"src/entry.c": render_entry(plan).encode(), "model.so": binary}

    def manifest_extra(self, plan: ExecutionPlan, target: Target) -> dict[str, Any]:
        # the loader checks these against the host before it opens the library
        return {MACHINE_KEY: target.arch, FEATURES_KEY: sorted(target.features)}
