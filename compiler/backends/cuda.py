"""The CUDA backend: CUDA C kernels for an NVIDIA GPU, built with nvcc into one module
(model.cubin) with a launch table in the manifest, run through pycuda
(compiler/runtime/cuda.py) as one CUDA graph."""

from __future__ import annotations

import os
import statistics
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from compiler.abi import MANIFEST_LAUNCHES
from compiler.backends.base import Backend
from compiler.build.nvcc import compile_cubin
from compiler.codegen.cuda.kernel import launch_table, planned_launch, render_module
from compiler.codegen.cuda.kernel import render_kernel as render_cuda
from compiler.ir.graph import Graph
from compiler.ir.te import Compute
from compiler.options import CompileOptions
from compiler.runtime import load
from compiler.runtime.cuda import gpu_runs
from compiler.schedule.cuda_attention_tile import attention_fits
from compiler.schedule.cuda_tile import plan_cuda_tile, row_group_fits
from compiler.schedule.measure import Timing
from compiler.schedule.plan import ExecutionPlan, Kernel, TileConfig
from compiler.schedule.split_k import split_contractions
from compiler.schedule.tilegraph.attention import fuse_attention
from compiler.schedule.tilegraph.groups import GroupLog
from compiler.schedule.tilegraph.rows import fuse_rows
from compiler.target.base import Target


class CudaBackend(Backend):
    kind = "cuda"
    source_suffix = "cu"
    measure_threshold_us = 2.0  # a GPU times a kernel in microseconds
    load_failure_means_absent = True  # no GPU, no pycuda, or another architecture

    def split_reductions(self, graph: Graph, target: Target, whole: Collection[int] = ()) -> dict[int, int]:
        # a contraction whose outputs leave SMs idle walks its K in slices side by side
        return split_contractions(graph, target.units, whole)

    def partition(self, graph: Graph, target: Target, log: GroupLog | None = None) -> None:
        # attention first: its softmax would otherwise become a row group of its own; a
        # block of query rows per thread block, key and value blocks in shared memory
        fuse_attention(graph, log, fits=attention_fits)
        # a row per thread block, its stages in shared memory (or recomputed where read)
        fuse_rows(graph, fits=row_group_fits, log=log)

    def device_present(self, target: Target) -> bool:
        return gpu_runs(target.arch)

    def unrunnable(self, target: Target) -> str | None:
        return None  # loading says why when it cannot run here (load_failure_means_absent)

    def time_candidates(self, timings: Sequence[Timing], target: Target,
                        opts: CompileOptions) -> dict[str, list[float]]:
        """Each kernel's candidates in one cubin (built side by side, one nvcc per kernel),
        timed one after another on the GPU."""
        from compiler.runtime.cuda_timer import time_cuda_kernels

        def build(t: Timing) -> bytes:
            c = t.kernel.compute
            return compile_cubin("\n".join(render_cuda(c, tile, sym)
                                           for tile, sym in zip(t.tiles, t.symbols(), strict=True)),
                                 target.arch)

        with ThreadPoolExecutor(max(1, min(len(timings), os.cpu_count() or 1))) as pool:
            cubins = list(pool.map(build, timings))
        out = {}
        for t, cubin in zip(timings, cubins, strict=True):
            c = t.kernel.compute
            launches = [(sym, planned_launch(tile).grid, planned_launch(tile).block)
                        for tile, sym in zip(t.tiles, t.symbols(), strict=True)]
            times = time_cuda_kernels(cubin, launches, c)
            out[t.key] = [times[s] for s in t.symbols()]
        return out

    def time_plan(self, plan: ExecutionPlan, artifact: Path, feeds: Mapping[str, np.ndarray],
                  opts: CompileOptions, target: Target) -> dict[str, float]:
        # CUDA events around each launch of the model's own run, on its real inputs
        times = load(artifact).kernel_times(feeds)
        return {sym: statistics.median(ms) * 1e3 for sym, ms in times.items()}

    def plan_tile(self, compute: Compute, tile: TileConfig, target: Target,
                  constant_inputs: Sequence[int]) -> TileConfig:
        return plan_cuda_tile(compute, tile)

    def render_kernel(self, kernel: Kernel, target: Target) -> str:
        return render_cuda(kernel.compute, kernel.tile, kernel.symbol)

    def link(self, plan: ExecutionPlan, binaries: Mapping[str, bytes], target: Target) -> bytes:
        """Kernels are cached as tiling + source; a model's kernels compile together into one
        module for the target's architecture."""
        return compile_cubin(render_module(plan), target.arch)

    def artifact_files(self, plan: ExecutionPlan, binary: bytes) -> dict[str, bytes]:
        return {"model.cubin": binary}

    def manifest_extra(self, plan: ExecutionPlan, target: Target) -> dict[str, Any]:
        return {MANIFEST_LAUNCHES: launch_table(plan)}
