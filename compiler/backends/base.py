"""The interface between the pipeline and one kind of target (tinygrad's `Compiled`
device, Hidet's backend): everything the pipeline does differently for C on a CPU and
CUDA C on a GPU, so that `compiler/pipeline.py` asks the target for its backend and
branches on nothing.

A backend sits above codegen, build and runtime (it pairs a renderer with its
toolchain, its artifact files and the loader that runs them) and below the pipeline.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compiler.ir.graph import Graph
from compiler.ir.te import Compute
from compiler.options import CompileOptions
from compiler.schedule.measure import Timing
from compiler.schedule.plan import ExecutionPlan, Kernel, TileConfig
from compiler.schedule.tilegraph.groups import GroupLog
from compiler.target.base import Target


class Backend(ABC):
    """Renders, builds, packages and times the kernels of one target kind."""

    kind: str
    source_suffix: str  # of each kernel's file under src/ in the artifact
    # Kernels the model predicts faster than this are not worth timing on the device:
    # measurement noise and the extra toolchain run cost more than any difference found.
    measure_threshold_us: float

    def target_for(self, target: Target, opts: CompileOptions) -> Target:
        """The target the compilation plans for (the CPU narrows to `threads` cores)."""
        return target

    @abstractmethod
    def split_reductions(self, graph: Graph, target: Target, whole: Collection[int] = ()) -> dict[int, int]:
        """Cut, in place, the reductions of the lowered graph that are too long for the
        target's parallelism into slices, before anything is fused, except the nodes in
        `whole`; returns the partial sums' tensors and the id of the node each was cut from."""

    @abstractmethod
    def partition(self, graph: Graph, target: Target, log: GroupLog | None = None) -> None:
        """Fuse what this backend fuses beyond register-level fusion (row groups), in place,
        offering each group to `log` and recording it there."""

    @abstractmethod
    def device_present(self, target: Target) -> bool:
        """Whether this machine runs the target's kernels (so top-k candidates are timed)."""

    def timing_target(self, target: Target) -> Target:
        """The machine the target's kernels are timed on, as a Target (its caches size the
        copies a lowering choice is timed on): the target itself where it is the device."""
        return target

    @abstractmethod
    def unrunnable(self, target: Target) -> str | None:
        """Why this machine cannot validate the target's artifacts before loading one, or None."""

    load_failure_means_absent: bool = False  # a load error says the device is absent, not a bug

    @abstractmethod
    def time_candidates(self, timings: Sequence[Timing], target: Target,
                        opts: CompileOptions) -> dict[str, list[float]]:
        """Microseconds of each candidate of each kernel (key -> per-candidate times)."""

    @abstractmethod
    def time_plan(self, plan: ExecutionPlan, artifact: Path, feeds: Mapping[str, np.ndarray],
                  opts: CompileOptions, target: Target) -> dict[str, float]:
        """Median microseconds of each kernel of `plan` (symbol -> us), run from `artifact`
        (the plan's, already validated) on this machine as `target`; `feeds` are the
        model's inputs. As close as the backend can to the kernel's time inside a run."""

    def plan_tile(self, compute: Compute, tile: TileConfig, target: Target,
                  constant_inputs: Sequence[int]) -> TileConfig:
        """`tile` (an rTile) with the backend's decisions below it made, so that codegen
        renders them and decides nothing (CPU: the GEMM blocking and row-group member
        tiles; CUDA: the kernel shape and launch); `constant_inputs`: the input positions
        holding weights. Called on every candidate when the plan is built. As it is, by default."""
        return tile

    def tile_variants(self, compute: Compute, tile: TileConfig, target: Target,
                      constant_inputs: Sequence[int]) -> list[tuple[float, TileConfig]]:
        """Other ways the backend could run rTile `tile`, planned as `plan_tile` plans it,
        each with its predicted time relative to `plan_tile`'s: measured beside the
        top-k where the device is present, so that the fastest on this device wins where
        the model's ranking is wrong. None by default."""
        return []

    def place(self, plan: ExecutionPlan, target: Target) -> None:  # noqa: B027 (optional step)
        """Backend decisions recorded in the plan once tiles are final (CPU: prepacking);
        none by default."""

    @abstractmethod
    def render_kernel(self, kernel: Kernel, target: Target) -> str:
        """The kernel's source, from its Compute and tile in the plan."""

    def compile_kernels(self, sources: Mapping[str, str], target: Target) -> dict[str, bytes]:
        """Per-kernel binaries cached beside the source (symbol -> bytes; none by default)."""
        return {}

    @abstractmethod
    def link(self, plan: ExecutionPlan, binaries: Mapping[str, bytes], target: Target) -> bytes:
        """The model's binary from the plan and every kernel's cached binary (by key)."""

    @abstractmethod
    def artifact_files(self, plan: ExecutionPlan, binary: bytes) -> dict[str, bytes]:
        """What the artifact holds besides kernel sources, weights, manifest and report."""

    @abstractmethod
    def manifest_extra(self, plan: ExecutionPlan, target: Target) -> dict[str, Any]:
        """The backend's part of the manifest (what its runtime loader reads)."""
