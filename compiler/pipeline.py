"""compile_model(): the compiler's stages in order, with progress callbacks.

load -> lower -> partition (register-level connection) -> schedule (rTile
construction, top-k measurement on the device where it is present, keys,
plan) -> codegen (cache misses only) -> build -> validate -> package.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import onnx

from compiler import frontend
from compiler.backends import Backend, backend_for
from compiler.cache import (
    KernelCache,
    KernelEntry,
    KernelSignature,
    MemoryKernelCache,
    choice_signature,
    exact_hit,
    options_key,
    signature_of,
)
from compiler.cost.model import dram_bytes
from compiler.cost.roofline import KernelTime, kernel_work, roofline_report
from compiler.errors import ModelError, TileforgeError, ValidationError
from compiler.frontend.choices import Choice, Chooser
from compiler.ir.graph import Graph
from compiler.ir.te import Compute
from compiler.options import CompileOptions
from compiler.runtime.artifact import WEIGHTS
from compiler.runtime.interleaved import time_interleaved, wait_until_idle
from compiler.schedule.cpu_gemm import gemm_work
from compiler.schedule.measure import Timing, fastest, measure_top_k
from compiler.schedule.plan import ExecutionPlan, Kernel, TileConfig
from compiler.schedule.planner import Constants, build_plan, constant_options, weights_blob
from compiler.schedule.rtile import Candidate, construct
from compiler.schedule.split_k import SplitVerdict, time_splits
from compiler.schedule.tilegraph.groups import Group, GroupLog, Level, Member, lowered_copy
from compiler.schedule.tilegraph.price_record import (
    PlanRecord,
    keep_record,
    prices_signature,
    recall_record,
)
from compiler.schedule.tilegraph.pricing import Pricer
from compiler.schedule.tilegraph.registers import fuse
from compiler.schedule.tilegraph.report import fusion_report
from compiler.schedule.tilegraph.split import record_times, time_groups
from compiler.stages import STAGES
from compiler.target import get_target
from compiler.target.base import Target
from compiler.target.cpu import host_description

if TYPE_CHECKING:
    from compiler.runtime.executable import Executable
    from compiler.runtime.validate import Reference, ReferenceRun

Progress = Callable[[str, float], None]
T = TypeVar("T")
# Plans made at most, when measured groups are split back: each round times only groups
# it has not timed yet; the last keeps only groups timed no slower in an earlier round.
MAX_PLANS = 3
# Timing an op's two lowerings (`_Compilation.choose`): alternating runs of each, at least
# this many and this long in all (a 3x3 convolution on 56 x 56 takes 1-3 ms a run).
CHOICE_RUNS = 10
CHOICE_SECONDS = 0.3
# Lowerings timed within this share of each other are timed once more and judged on all their
# runs: the answer is kept in the cache, and one 0.3 s alternation on a noisy host once
# measured ResNet-50's 512-channel direct convolution at 1.94 ms a copy (usually 1.03-1.18)
# against Winograd's 1.71, and took Winograd.
CHOICE_CLOSE = 0.15
# Instances of the op a choice is timed on at most (`choice_copies`): 16 of a 3 ms convolution
# make a 48 ms run.
MAX_CHOICE_COPIES = 16


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
    plan: ExecutionPlan | None = None  # what the artifact runs (`tileforge profile` times its kernels)
    target: Target | None = None  # the target planned for (a CPU narrowed to the threads asked for)


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
    choose: Chooser | None = None,
    *,
    backend: Backend | None = None,
) -> CompileResult:
    """Compile an ONNX model for `target` into an artifact that runs and matches onnxruntime.

    Where an op has two lowerings (compiler/frontend/choices.py), `choose` picks one;
    by default both are timed on the op alone where the target is this machine.
    `backend`: the instance to compile with (by default a new one of the target's kind); a
    lowering choice's small models are compiled with their model's, whose objects they share.
    Raises ModelError (and subclasses) for problems with the model or options,
    BuildError / ValidationError for problems of ours.
    """
    opts = CompileOptions.from_dict(options) if not isinstance(options, CompileOptions) else options
    built = _build(model, target, opts, cache, progress, choose, backend)
    c, st, report = built.compilation, built.stages, built.report
    out = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="tileforge-artifact-")) / "model.tar.gz"
    try:
        with st.stage("package"):
            report["stage_seconds"] = dict(st.seconds)
            assert built.weights_sha is not None
            sha = c.package(out, built.files, built.model_sha, report, {WEIGHTS: built.weights_sha.result()})
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
        kernels=report["kernels"], plan=c.plan, target=c.target,
    )


@dataclass
class _Built:
    """A compilation up to its artifact's files, validated where asked (`_build`)."""

    compilation: _Compilation
    stages: _Stages
    report: dict
    files: dict[str, bytes | memoryview]
    model_sha: str
    weights_sha: _Background[str] | None  # where the artifact is to be packed
    executable: Executable | None  # the validated one, where `_build` was asked to keep it


def _build(model: bytes | str | Path | onnx.ModelProto, target: str | Target, opts: CompileOptions,
           cache: KernelCache | None, progress: Progress | None, choose: Chooser | None,
           backend: Backend | None, keep_executable: bool = False) -> _Built:
    """`compile_model`'s stages up to the artifact's files and their validation (the
    executable validated kept where asked: a lowering choice times it, packing nothing)."""
    tgt = get_target(target) if isinstance(target, str) else target
    backend = backend or backend_for(tgt)
    tgt = backend.target_for(tgt, opts)
    c = _Compilation(tgt, backend, opts, cache if cache is not None else MemoryKernelCache())
    st = _Stages(progress)

    with st.stage("load"):
        data = model_bytes(model)
        c.model_bytes = len(data)
        # hashed beside the lowering (hashlib lets go of the GIL: 0.2 s of a 209 MB model's)
        model_hash = _Background(_sha256, data)
    c.before_timing = functools.partial(_settle, model_hash)
    with st.stage("lower"):
        lowered = frontend.import_model(data, input_shapes=opts.input_shapes, choose=choose or c.choose)
    # The reference loads on a thread of its own while the compilation goes on, once the
    # frontend has accepted the model; nothing is timed until it and the hash have ended.
    # onnxruntime's outputs recorded by an earlier compile of the same model stand in for it.
    reference = None
    if opts.validate and backend.unrunnable(tgt) is None:
        reference = _Reference(c.cache, model_hash.result(), opts, data)
    c.before_timing = functools.partial(_settle, model_hash, reference and reference.loading)
    c.recall_record(model_hash.result())
    with st.stage("partition"):
        graph, log = c.partition(lowered)
    with st.stage("schedule"):
        c.schedule(graph)
        for k in range(1, MAX_PLANS):
            slower, whole = c.split_slower(log), c.whole_faster()
            if not (slower or whole):
                break
            # again, the slower groups' members apart and the split contractions timed slower
            # whole (the last plan is not timed: only groups confirmed already; a chain split
            # back shrinks each round, UNet's twice)
            graph, log = c.partition(lowered, last=k == MAX_PLANS - 1)
            c.schedule(graph)
    with st.stage("codegen"):
        sources = c.render_misses()
    with st.stage("build"):
        binary = c.build(sources)
    model_sha = model_hash.result()
    report = c.report(model_sha, graph, log)
    files = c.artifact_files(graph, binary)
    # for the manifest, beside the validation (not where nothing is packed: a choice's
    # small models, timed next, must not share the cores with it)
    weights_hash = None if keep_executable else _Background(_sha256, files[WEIGHTS])
    executable = None
    if opts.validate:
        # On the files as they are, before they are packed: the artifact is written once,
        # with its validation (packing and unpacking a 200 MB model's took 1.5 s).
        with st.stage("validate"):
            report["validation"], executable = _validate(reference, files, c.manifest(model_sha), opts, tgt, backend)
        if report["validation"]["passed"] is False:
            raise ValidationError(
                f"compiled model disagrees with onnxruntime: relative L2 error "
                f"{report['validation']['rel_l2_error']:.3g} > tolerance {opts.tolerance:g}"
            )
    if keep_executable and executable is None:
        executable = _loaded(files, c.manifest(model_sha), opts)
    return _Built(c, st, report, files, model_sha, weights_hash, executable if keep_executable else None)


def plan_fusion(model: bytes | str | Path | onnx.ModelProto, target: str | Target = "cpu",
                options: CompileOptions | dict | None = None) -> dict:
    """The fusion report of `model`'s plan (report.json's "fusion"), planned by the cost
    model alone and built by no toolchain: what the bench tracks for large models."""
    opts = CompileOptions.from_dict(options) if not isinstance(options, CompileOptions) else options
    opts = dataclasses.replace(opts, measure=False)
    tgt = get_target(target) if isinstance(target, str) else target
    backend = backend_for(tgt)
    c = _Compilation(backend.target_for(tgt, opts), backend, opts, MemoryKernelCache())
    graph, log = c.partition(frontend.import_model(model_bytes(model), input_shapes=opts.input_shapes))
    c.schedule(graph)
    return fusion_report(log, c.plan, c.target, c.pricer)


def choice_copies(weight_bytes: int, model_size: int, target: Target) -> int:
    """Instances of an op to time a lowering choice on (`Choice.model`). Where the model (its
    weights, mostly) is larger than the target's last cache, every op finds its weights out
    of cache in each run, so it is timed that way: on enough instances, each with weights of
    its own, that they overflow that cache too (at most MAX_CHOICE_COPIES). Timed alone, called
    again and again, an op finds its weights in cache: Winograd's, 16/9 the bytes, won a
    256-channel convolution on 14 x 14 alone on an Emerald Rapids Xeon and lost in ResNet-18
    (docs/PROFILE.md, stops 36 and 37). Else, or where the target does not say its caches, one."""
    caches = [level.capacity for level in target.levels if level.name != "dram"]
    if not caches or model_size <= max(caches) or weight_bytes <= 0:
        return 1
    return min(MAX_CHOICE_COPIES, max(caches) // weight_bytes + 1)


class _Compilation:
    """The state of one compilation between stages: plan, cache entries, candidates."""

    def __init__(self, target: Target, backend: Backend, opts: CompileOptions, cache: KernelCache) -> None:
        self.target, self.backend, self.opts, self.cache = target, backend, opts, cache
        self.fingerprint = target.fingerprint()
        self.entries: dict[str, KernelEntry] = {}  # key -> cached or newly built kernel
        self.signatures: dict[str, KernelSignature] = {}
        self.candidates: dict[str, list[Candidate]] = {}  # key -> ranked tilings of a miss
        self.measured: dict[str, list[float | None]] = {}  # key -> per-candidate microseconds
        self.construct_seconds = 0.0
        self.plan = ExecutionPlan(target=self.fingerprint)
        self.new_entries: list[KernelEntry] = []  # built here, cached once the model validates
        self.pricer = Pricer(target, backend.measure_threshold_us)
        self.prices_key: KernelSignature | None = None  # where the model's record is kept (`recall_record`)
        self.recalled = PlanRecord()  # what an earlier compile of the model kept
        self.figures: dict[str, tuple[int, int, int]] = {}  # the report's per kernel (`_figures`)
        self.split_back: list[Group] = []  # groups timed slower than their parts
        self.confirmed: set[frozenset[int]] = set()  # member sets of groups timed no slower
        self.timed: dict[str, float] = {}  # key -> microseconds of group checks' kernels
        self.before_timing: Callable[[], None] | None = None  # waits for work beside the compilation
        self.choices: dict[str, dict] = {}  # choice key -> what was timed and taken (`choose`)
        self.model_bytes = 0  # the model's serialized size, its weights' (`choice_copies`)
        self.splits: dict[int, int] = {}  # the plan's split-K partial-sum tensors -> the contraction cut
        self.whole: set[int] = set()  # contractions whose split-K timed slower than them whole
        self.split_verdicts: dict[int, SplitVerdict] = {}  # by contraction

    # -- lower --------------------------------------------------------------------------------

    def choose(self, choice: Choice) -> bool:
        """Whether to take `choice`'s alternative lowering: both lowerings of the op alone are
        compiled (with this compilation's options) and run in alternation, as cuDNN's "find"
        times convolution algorithms; the faster is taken, and the answer kept in the kernel
        cache beside the kernels (keyed like them by target, compiler and options). Where
        nothing is timed (`_measures`: measuring off, or no device here for the target) the
        frontend's guess stands. Where the model's weights overflow the target's caches, the op
        is timed with its weights out of cache too (`choice_copies`), as it runs in the model."""
        if not self._measures():
            return choice.default
        if choice.key not in self.choices:
            copies = choice_copies(choice.weight_bytes, self.model_bytes, self.backend.timing_target(self.target))
            sig = choice_signature(choice.kind, f"{choice.key} copies{copies}", self.fingerprint,
                                   self.opts.codegen_key())
            entry = exact_hit(self.cache.get(sig), sig)
            if entry is not None:
                self.choices[choice.key] = entry.extras["choice"]
            else:
                record = self._time_choice(choice, copies)
                self.choices[choice.key] = record
                if not record["failed"]:  # a failure may be the toolchain's of the moment: not kept
                    self.cache.put(KernelEntry(sig, {}, f"/* lowering choice {json.dumps(record)} */\n", b"",
                                               measured_us=min(record["ms_with"], record["ms_without"]) * 1e3,
                                               extras={"choice": record}))
        return bool(self.choices[choice.key]["taken"])

    def _time_choice(self, choice: Choice, copies: int) -> dict:
        """`choice`'s record: the median milliseconds the op takes without and with the
        alternative lowering (a run of `copies` instances of it, each with weights of its own,
        divided among them), which is taken, and why a lowering failed to build or validate
        (the other is then taken untimed; the guess, where both failed)."""
        from compiler.runtime.validate import random_inputs  # onnxruntime: loaded when needed

        model, opts = choice.model(copies), dataclasses.replace(self.opts, input_shapes={}, top_k=1)
        ms: dict[bool, float] = {}
        failed: dict[str, str] = {}
        # Each in a cache of its own: their kernels, built untuned (one candidate each), must
        # not stand in for the tuned ones the model's own compilation builds; with this
        # compilation's backend: the kernels they build (Winograd's transforms) come back among
        # the model's own top-k candidates, compiled once. The executable validated is timed,
        # no artifact packed (ResNet-18's eight small models: 2.4 s of packing and loading their
        # weights' copies). The two build side by side: the direct one is a single gcc run,
        # which would leave the other core idle.
        with ThreadPoolExecutor(2, thread_name_prefix="tileforge-choice") as pool:
            builds = {taken: pool.submit(_build, model, self.target, opts, MemoryKernelCache(), None,
                                         lambda _, t=taken: t, self.backend, keep_executable=True)
                      for taken in (False, True)}
        exes = {}
        for taken, build in builds.items():
            try:
                built = build.result()
            except TileforgeError as e:
                failed["with" if taken else "without"] = f"{type(e).__name__}: {e}"
                continue
            assert built.executable is not None
            exes[taken] = built.executable
        if len(exes) == 2:
            feeds = random_inputs(exes[False].input_specs, onnx.load_from_string(model), opts.seed)
            if self.before_timing is not None:
                self.before_timing()
            fns = [functools.partial(e.run, feeds) for e in exes.values()]
            runs = time_interleaved(fns, min_runs=CHOICE_RUNS, min_seconds=CHOICE_SECONDS)
            medians = [statistics.median(r) for r in runs]
            if max(medians) < (1 + CHOICE_CLOSE) * min(medians):
                again = time_interleaved(fns, min_runs=CHOICE_RUNS, min_seconds=CHOICE_SECONDS)
                runs = [first + second for first, second in zip(runs, again, strict=True)]
            ms = {t: statistics.median(r) * 1e3 / copies for t, r in zip(exes, runs, strict=True)}
        taken = min(ms, key=ms.__getitem__) if ms else next(iter(exes), choice.default)
        return {"kind": choice.kind, "key": choice.key, "taken": taken,
                "ms_without": round(ms[False], 4) if ms else None,
                "ms_with": round(ms[True], 4) if ms else None, "copies": copies, "failed": failed}

    # -- partition ----------------------------------------------------------------------------

    def partition(self, lowered: Graph, last: bool = False) -> tuple[Graph, GroupLog]:
        """A fused copy of the lowered graph and the log of its groups: connections the cost
        model prices slower are refused, and those split back after measuring are left apart.
        The `last` plan, which no measuring follows, makes no priced group above register
        level that was not timed no slower than its parts before."""
        graph = lowered_copy(lowered)
        self.splits = self.backend.split_reductions(graph, self.target, self.whole) if self.opts.split_k else {}
        log = GroupLog(graph, self.pricer.price, [*self.recalled.split_ids(), *(g.ids for g in self.split_back)],
                       self.confirmed if last else None)
        if self.opts.fuse:
            fuse(graph, log)
            self.backend.partition(graph, self.target, log)
        return graph, log

    def split_slower(self, log: GroupLog) -> list[Group]:
        """Time the plan's heavy groups against their parts where measuring is on; returns the
        groups that ran slower (kept in `split_back`, for the next partition to leave apart)."""
        if not (self.opts.measure and self.backend.device_present(self.target)):
            return []
        fused = {k.args[0]: k for k in self.plan.kernels}  # not a concatenation placed in place: it runs none
        heavy = [g for g in log.groups.values() if g.output in fused and self.pricer.heavy([m.compute for m in g.members])]
        # (a group whose fused kernel the cache holds keeps that decision untimed: `time_groups`)
        self._measure_parts([m for g in heavy if g.level != Level.REGISTERS and fused[g.output].key not in self.entries
                             for m in g.apart])
        slower = time_groups(heavy, fused, self._part, self.timed,
                             self._time,
                             lambda key: key in self.entries,
                             self._alone_us)
        self.split_back += slower
        self.confirmed.update(g.ids for g in heavy if g.kept)
        return slower

    def whole_faster(self) -> list[int]:
        """Time the plan's split-K contractions against them whole where measuring is on;
        returns those that ran faster whole (kept in `whole`, for the next partition)."""
        if not (self.splits and self._measures()):
            return []
        todo = {t: node for t, node in self.splits.items() if node not in self.split_verdicts}
        verdicts = time_splits(self.plan.kernels, todo, self._whole_kernel, self._time,
                               lambda key: key in self.entries)
        self.split_verdicts.update((v.node, v) for v in verdicts)
        faster = [v.node for v in verdicts if v.kept == "whole"]
        self.whole.update(faster)
        return faster

    def _whole_kernel(self, node: int, compute: Compute, constants: Constants, ops: tuple[str, ...]) -> Kernel:
        """A split contraction joined back (with its sum's epilogue), at its fastest tile."""
        key, tile = self.key_of(compute, constants), self.tile_of(compute, constants)
        k = Kernel(id=node, compute=compute, tile=tile, key=key, args=(), constant_inputs=constants, ops=ops)
        if key not in self.entries:
            self._measure([k])
            if self.measured.get(key):
                k.tile = self.candidates[key][fastest(self.measured[key])].tile
        return k

    def _alone_us(self, key: str) -> float | None:
        """The fastest top-k time of kernel `key` where its candidates were timed, else None."""
        times = self.measured.get(key)
        return times[fastest(times)] if times else None

    def _part(self, m: Member) -> Kernel:
        """The kernel a group's part (a lowered node, or a group it was made of) would run as
        on its own, with its own best tile: the fastest measured where its candidates were
        timed (`_measure_parts`), else the model's first."""
        key, tile = self.key_of(m.compute, m.constants), self.tile_of(m.compute, m.constants)
        if key not in self.entries and self.measured.get(key):
            tile = self.candidates[key][fastest(self.measured[key])].tile
        return Kernel(id=m.node, compute=m.compute, tile=tile, key=key, args=(), constant_inputs=m.constants,
                      ops=(m.op,))

    def _measure_parts(self, parts: Sequence[Member]) -> None:
        """Time the top-k tilings of groups' parts, as a plan's kernels are timed. A part split
        back out runs on its fastest, so the group is weighed against that: against the
        model's first tiling, often twice the fastest (a MobileNetV2 28 x 28 projection: 115 us
        against 50), the convolution chains of MobileNetV2 were kept where they ran 12-26%
        slower than their parts in the model's run (Zen 5). Register groups (an epilogue in
        its producer's loop) are left to the model's tiling: they gain what they save whatever
        the tile, and timing every part of every such group would add seconds to each compile."""
        self._measure([self._part(m) for m in parts])

    # -- schedule -----------------------------------------------------------------------------

    def key_of(self, compute: Compute, constants: Constants = ()) -> str:
        """The cache key `compute` is built and kept under: a compile that times candidates
        keeps tuned kernels (`options_key`); one that does not takes a tuned kernel where the
        cache holds one, else keeps its own."""
        options = {**self.opts.codegen_key(), **constant_options(constants)}
        sig = signature_of(compute, self.fingerprint, options, tuned=True)
        tuned = self._looked_up(sig)
        if self._measures() or tuned in self.entries:
            return tuned
        # the same kernel untuned: only its options differ (not canonicalised again)
        return self._looked_up(dataclasses.replace(sig, options=options_key(options)))

    def _looked_up(self, sig: KernelSignature) -> str:
        """`sig`'s key, with its cache entry in `entries` where the cache holds one (asked once)."""
        if sig.key not in self.signatures:
            self.signatures[sig.key] = sig
            hit = self.cache.get(sig)
            if hit is not None:
                self.entries[sig.key] = hit
        return sig.key

    def tile_of(self, compute: Compute, constants: Constants = ()) -> TileConfig:
        key = self.key_of(compute, constants)
        if key in self.entries:
            return TileConfig.from_json(self.entries[key].tile_config)
        if key not in self.candidates:
            t0 = time.perf_counter()
            ranked = construct(compute, self.target, top_k=self._top_k())
            self.candidates[key] = [
                dataclasses.replace(c, tile=self.backend.plan_tile(compute, c.tile, self.target, constants))
                for c in ranked]
            if self._top_k() > 1:  # measured: the other ways to run the best rTile are timed too
                best = ranked[0].estimate
                self.candidates[key] += [
                    Candidate(tile, dataclasses.replace(best, time_us=best.time_us * relative))
                    for relative, tile in self.backend.tile_variants(compute, ranked[0].tile, self.target, constants)]
            self.construct_seconds += time.perf_counter() - t0
        return self.candidates[key][0].tile

    def _top_k(self) -> int:
        return self.opts.top_k if self._measures() else 1

    def _measures(self) -> bool:
        """Whether this compilation times things (kernels' candidates, lowering choices): asked
        to, and this machine runs the target's code."""
        return self.opts.measure and self.backend.device_present(self.target)

    def schedule(self, graph: Graph) -> None:
        self.plan = build_plan(graph, self.fingerprint, self.tile_of, self.key_of)
        self._measure(self.plan.kernels)
        for k in self.plan.kernels:
            k.cache_hit = k.key in self.entries
            if k.cache_hit:
                e = self.entries[k.key]
                k.estimated_us, k.measured_us = e.estimated_us, e.measured_us
                continue
            best = fastest(self.measured.get(k.key))
            cand = self.candidates[k.key][best]
            k.tile = cand.tile
            k.estimated_us = round(cand.estimate.time_us, 3)
            times = self.measured.get(k.key)
            k.measured_us = None if times is None else times[best]
        self.backend.place(self.plan, self.target)

    def _measure(self, kernels: Sequence[Kernel]) -> None:
        """Time the top-k tilings of every heavy miss among `kernels` on the device (the
        backend's timer); keys timed before (an earlier plan's, or a part's) keep their times."""
        misses = {k.key: k for k in kernels if k.key not in self.entries}
        todo = {key: c for key, c in self.candidates.items() if key in misses and key not in self.measured}
        self.measured.update(measure_top_k(todo, misses, self.backend.measure_threshold_us, self._time))

    def _time(self, timings: Sequence[Timing]) -> dict[str, list[float]]:
        """The backend's timer, once nothing else runs beside it (`before_timing`)."""
        if self.before_timing is not None:
            self.before_timing()
        return self.backend.time_candidates(timings, self.target, self.opts)

    # -- codegen and build --------------------------------------------------------------------

    def _misses(self) -> dict[str, Kernel]:
        out: dict[str, Kernel] = {}
        for k in self.plan.kernels:
            if k.key not in self.entries and k.key not in out:
                out[k.key] = k
        return out

    def render_misses(self) -> dict[str, str]:
        """Generated source of every kernel not in the cache (symbol -> source)."""
        return {k.symbol: self.backend.render_kernel(k, self.target) for k in self._misses().values()}

    def build(self, sources: dict[str, str]) -> bytes:
        """Compile the misses (kept for `store`); returns the model's binary (the backend
        links the kernels: CPU objects with the entry point into model.so; CUDA sources
        into one module, model.cubin)."""
        objects = self.backend.compile_kernels(sources, self.target)
        for key, k in self._misses().items():
            entry = KernelEntry(
                signature=self.signatures[key], tile_config=k.tile.to_json(),
                source=sources[k.symbol], binary=objects.get(k.symbol, b""),
                te_json=k.compute.canonical(), estimated_us=k.estimated_us, measured_us=k.measured_us,
                extras={"candidates": self._candidate_log(key)},
            )
            self.new_entries.append(entry)
            self.entries[key] = entry
        binaries = {k.symbol: self.entries[k.key].binary for k in self.plan.kernels}
        return self.backend.link(self.plan, binaries, self.target)

    def store(self, validation: dict) -> None:
        """Cache the kernels built here, now that the model they belong to is accepted, and
        the cost model's prices of its plan where some were constructed here.

        Called only after validation passed (or was not asked for / could not run): a
        kernel of a model that disagrees with the reference never enters the cache.
        Each carries the relative L2 error of the validation that accepted it.
        """
        for entry in self.new_entries:
            entry.validation_error = validation.get("rel_l2_error")
            if validation.get("passed") is None and validation.get("skipped"):
                entry.extras["not_validated"] = validation["skipped"]
            self.cache.put(entry)
        made_figures = len(self.figures) > len(self.recalled.figures)  # the recalled ones and more
        if self.prices_key is not None and (self.pricer.constructed or self.split_back or made_figures):
            keep_record(self.cache, self.prices_key, PlanRecord(
                self.pricer.prices, (*self.recalled.split_back, *(g.to_json() for g in self.split_back)),
                self.figures, self.pricer.chains))

    def recall_record(self, model_sha: str) -> None:
        """Price with the estimates an earlier compile of this model on this target made, and
        leave apart the groups it timed slower than their parts
        (compiler/schedule/tilegraph/price_record.py), where the cache holds its record."""
        # as for kernels (`key_of`): a compile that times nothing takes a tuned record where one is
        for tuned in (True, False) if not self._measures() else (True,):
            self.prices_key = prices_signature(model_sha, self.opts.input_shapes, self.target, tuned)
            self.recalled = recall_record(self.cache, self.prices_key)
            if self.recalled != PlanRecord():
                break
        self.figures = dict(self.recalled.figures)
        self.pricer = Pricer(self.target, self.backend.measure_threshold_us, self.recalled.prices,
                             self.recalled.chains)

    def _candidate_log(self, key: str) -> list[dict]:
        """Predicted beside measured time of each candidate, so the model can be checked."""
        times = self.measured.get(key) or [None] * len(self.candidates.get(key, []))
        return [{"tile": c.tile.to_json(), "estimated_us": round(c.estimate.time_us, 3),
                 "bound": c.estimate.bound, "measured_us": t}
                for c, t in zip(self.candidates.get(key, []), times, strict=True)]

    # -- package ------------------------------------------------------------------------------

    def _recall_group_times(self, log: GroupLog) -> None:
        """Fill in the measured times of `log`'s groups that this plan did not time (a last
        plan keeps groups confirmed in earlier rounds) from the kernels timed then. Only a
        group whose fused kernel was timed has its parts made (each part's tile is
        constructed: 3 of a warm ResNet-50 compile's 7 s, where nothing was timed)."""
        fused = {k.args[0]: k for k in self.plan.kernels}
        for g in log.groups.values():
            if g.measured_fused_us is None and g.output in fused and fused[g.output].key in self.timed:
                record_times(g, fused[g.output], [self._part(m) for m in g.apart], self.timed)

    def report(self, model_sha: str, graph: Graph, log: GroupLog) -> dict:
        self._recall_group_times(log)
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
            "roofline": roofline_report(kernel_times(self.plan, figures=self._figures), self.target),
            "fusion": fusion_report(log, self.plan, self.target, self.pricer, self.split_back,
                                    [{**g, "split_by": "cache", "measured_fused_us": None, "measured_unfused_us": None}
                                     for g in self.recalled.split_back],
                                    lambda k: self._figures(k)[2]),
            "choices": list(self.choices.values()),
            "split_k": [v.to_json() for v in self.split_verdicts.values()],
            "inputs": [graph.tensors[t].name for t in graph.inputs],
            "outputs": [graph.tensors[t].name for t in graph.outputs],
        }

    def _figures(self, k: Kernel) -> tuple[int, int, int]:
        """Kernel `k`'s (FLOPs, compulsory bytes, predicted DRAM bytes at its tile), for the
        report: from the model's record where an earlier compile kept them (0.5 s of a warm
        ResNet-50 compile's report went to them, Zen 3), else from the TE analyses."""
        key = f"{k.key}/{hashlib.sha256(json.dumps(k.tile.to_json(), sort_keys=True).encode()).hexdigest()[:16]}"
        if key not in self.figures:
            self.figures[key] = (*kernel_work(k.compute, self.target), dram_bytes(k.compute, k.tile, self.target))
        return self.figures[key]

    def artifact_files(self, graph: Graph, binary: bytes) -> dict[str, bytes | memoryview]:
        ext = self.backend.source_suffix
        files = {f"src/{k.symbol}.{ext}": self.entries[k.key].source.encode() for k in self.plan.kernels}
        files.update(self.backend.artifact_files(self.plan, binary))
        files[WEIGHTS] = weights_blob(graph, self.plan)
        return files

    def _manifest_extra(self, model_sha: str) -> dict:
        """What the artifact's manifest says beyond the plan."""
        return {"target": self.target.name, "target_fingerprint": self.fingerprint,
                "toolchain": self.target.toolchain, "model_sha256": model_sha,
                "target_kind": self.target.kind, **self.backend.manifest_extra(self.plan, self.target)}

    def manifest(self, model_sha: str) -> dict:
        """The artifact's manifest, without the file hashes that packing adds."""
        from compiler.package import manifest_of

        return manifest_of(self.plan, self._manifest_extra(model_sha))

    def package(self, out: Path, files: dict[str, bytes | memoryview], model_sha: str, report: dict,
                hashed: Mapping[str, str]) -> str:
        from compiler.package import write_artifact

        return write_artifact(out, self.plan, files, self._manifest_extra(model_sha),
                              json.loads(json.dumps(report, default=str)), hashed)


def kernel_times(plan: ExecutionPlan, measured: dict[str, float] | None = None,
                 figures: Callable[[Kernel], tuple[int, int, int]] | None = None) -> list[KernelTime]:
    """The plan's kernels with a time, for the roofline: from `measured` (symbol ->
    microseconds) where given, else each kernel's top-k measurement (none for kernels
    that were not timed). `figures`: a kernel's FLOPs and compulsory bytes where known
    (`_Compilation._figures`)."""
    out = []
    for k in plan.kernels:
        us = k.measured_us if measured is None else measured.get(k.symbol)
        if us is not None:
            tiles = (k.tile, *(t for block in k.tile.members for t in block))
            gemms = tuple((t.gemm.m, t.gemm.n, t.gemm.k) for t in tiles if t.gemm is not None)
            out.append(KernelTime(k.id, k.symbol, k.compute, k.tile.block, us, k.ops, gemms,
                                  functools.partial(gemm_work, k.compute, k.tile),
                                  k.tile.chain.rows if k.tile.chain is not None else None,
                                  figures(k)[:2] if figures is not None else None))
    return out


class _Background(Generic[T]):
    """A call run on a thread of its own while the compilation goes on."""

    def __init__(self, fn: Callable[[Any], T], arg: Any) -> None:
        pool = ThreadPoolExecutor(1, thread_name_prefix="tileforge-background")
        self._future = pool.submit(fn, arg)
        pool.shutdown(wait=False)

    def result(self) -> T:
        """What the call returned (its exception, raised here)."""
        return self._future.result()

    def settle(self) -> None:
        """Wait until the call has ended, however it ended."""
        futures.wait([self._future])


# Before a timing's warm-up, as before each of its phases (`time_interleaved`): OpenBLAS's
# workers spin about 0.1 s after numpy's matmul on a Winograd transform's weights, made just
# before a lowering choice is timed. Without this wait ResNet-50's first choice measured
# Winograd at 1.14-1.20 ms a copy in 3 of 4 compiles (a near tie with the direct 1.15), with it
# 0.52-0.66 in 8 of 8 (so too with OPENBLAS_NUM_THREADS=1); the waits before each phase alone
# had not prevented it (the warm-up's calls, each executable's first, run before them).
SETTLE_WINDOW_S = 0.01


def _settle(*jobs: _Background | None) -> None:
    """Before a timing: the jobs beside the compilation ended, and the process idle."""
    for job in jobs:
        if job is not None:
            job.settle()
    wait_until_idle(SETTLE_WINDOW_S)


def _sha256(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


class _Reference:
    """What a compilation validates against: onnxruntime's outputs recorded by an earlier
    compile of the same model (compiler/runtime/recorded.py), or else onnxruntime loading
    the model on a thread of its own (`loading`), whose run a validation that passes
    records (`keep`)."""

    def __init__(self, cache: KernelCache, model_sha: str, opts: CompileOptions, data: bytes) -> None:
        from compiler.runtime.recorded import recall, reference_signature

        self.cache, self.data = cache, data
        self.signature = reference_signature(model_sha, opts.input_shapes, opts.seed)
        self.recorded = recall(cache, self.signature)
        self.loading: _Background[Reference] | None = None
        if self.recorded is None:
            self.loading = self._load()

    def _load(self) -> _Background[Reference]:
        from compiler.runtime.validate import reference_for  # onnxruntime: loaded when needed

        return _Background(reference_for, self.data)

    def run(self, exe: Executable, seed: int) -> tuple[ReferenceRun, bool]:
        """onnxruntime's run on `exe`'s inputs, and whether it was recorded before."""
        from compiler.runtime.recorded import fitting
        from compiler.runtime.validate import reference_run

        recorded = None if self.recorded is None else fitting(self.recorded, exe)
        if recorded is not None:
            return recorded, True
        return reference_run(exe, (self.loading or self._load()).result(), seed), False

    def keep(self, exe: Executable, run: ReferenceRun) -> None:
        """Record `run` for later compiles of the model."""
        from compiler.runtime.recorded import record

        record(self.cache, self.signature, exe, run)


def _loaded(files: Mapping[str, bytes | memoryview], manifest: dict, opts: CompileOptions) -> Executable:
    """The artifact's `files` (described by `manifest`) loaded as they are, unpacked; the
    weights go from memory to the executable, not through a file."""
    from compiler.package import write_unpacked
    from compiler.runtime import load_folder

    with tempfile.TemporaryDirectory(prefix="tileforge-validate-") as tmp:
        write_unpacked(Path(tmp), {n: d for n, d in files.items() if n != WEIGHTS})
        return load_folder(manifest, Path(tmp), opts.threads or None, weights=files[WEIGHTS])


def _validate(reference: _Reference | None, files: dict[str, bytes | memoryview], manifest: dict,
              opts: CompileOptions, target: Target, backend: Backend) -> tuple[dict, Executable | None]:
    """Run the artifact's `files` (described by `manifest`) against onnxruntime's outputs
    (`reference`) on this host, and say where; with the executable run (None where none
    ran). An artifact this host cannot run (a CPU target's ISA it lacks, a GPU where none
    is present) is recorded as not validated (passed None, with the reason), never as passed."""
    from compiler.errors import ArtifactError
    from compiler.runtime.validate import check

    not_run = {"passed": None, "max_abs_error": None, "rel_l2_error": None, "tolerance": opts.tolerance}
    if reference is None:  # none was loaded: this host cannot run the target
        return {**not_run, "skipped": backend.unrunnable(target)}, None
    try:
        exe = _loaded(files, manifest, opts)
    except ArtifactError as e:
        if not backend.load_failure_means_absent:
            raise
        return {**not_run, "skipped": f"not run: {e}"}, None
    run, recorded = reference.run(exe, opts.seed)
    result = check(exe, run, opts.tolerance)
    if result["passed"] and not recorded:  # nothing of a model that failed enters the cache
        reference.keep(exe, run)
    return {**result, "seed": opts.seed, "validated_on": host_description(),
            "reference": "onnxruntime, recorded by an earlier compile" if recorded else "onnxruntime"}, exe
