"""An op with two lowerings (Winograd or the direct convolution) gets the one that ran
faster on this machine: timed on the op alone when first met, then kept in the kernel cache
(compiler/pipeline.py `_Compilation.choose`)."""

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler.pipeline
from compiler.build import object_memo
from compiler.cache import MemoryKernelCache
from compiler.errors import BuildError
from compiler.pipeline import _Compilation, compile_model
from compiler.runtime.cuda import gpu_runs
from compiler.runtime.recorded import REFERENCE_PATTERN
from compiler.schedule.tilegraph.price_record import PRICES_PATTERN
from compiler.target.registry import get_target
from compiler.target.toolchain import find_tool

C = 64


def _model() -> bytes:
    """A 3x3 convolution Winograd fits, with a Relu."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal((C, C, 3, 3)) * 0.05).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(C).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 28, 28])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, 28, 28])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _winograd_kernels(result) -> bool:
    # Winograd lowers the convolution to several nodes (transforms, batched matmul), the direct
    # lowering to one. Not "is the Relu fused": a measured compile may time the direct Conv+Relu
    # group slower than its parts on a loaded host and split it back (CI: two workers, two cores).
    return sum(k["ops"].count("Conv") for k in result.kernels) > 1


def test_the_faster_lowering_is_timed_once_and_then_taken_from_the_cache(tmp_path, monkeypatch):
    compiled: list[str] = []  # each source gcc compiles, its symbol masked
    real_compile = object_memo.compile_objects

    def counted(sources, flags):
        compiled.extend(src.replace(sym, "SYM") for sym, src in sources.items())
        return real_compile(sources, flags)

    monkeypatch.setattr(object_memo, "compile_objects", counted)
    cache = MemoryKernelCache()
    first = compile_model(_model(), "cpu", {"threads": 1}, cache=cache, output=tmp_path / "a.tar.gz")
    # the op's small models are built with the model's backend: a kernel they compiled (the
    # direct convolution, Winograd's transforms) is not compiled again among the model's
    # candidates or for its build
    assert compiled and len(set(compiled)) == len(compiled)
    (record,) = first.report["choices"]
    assert record["kind"] == "winograd" and record["ms_with"] > 0 and record["ms_without"] > 0
    assert record["taken"] == (record["ms_with"] < record["ms_without"])
    assert _winograd_kernels(first) == record["taken"]
    assert first.validation["passed"] is True
    stored = [e for e in cache.entries().values() if e.signature.op_pattern == "choice:winograd"]
    assert len(stored) == 1 and stored[0].extras["choice"] == record and record["failed"] == {}
    # the convolution alone was compiled untuned on a cache of its own: only the model's kernels are kept
    kernels = {e.key for e in cache.entries().values()  # not onnxruntime's record, nor the model's prices
               if e not in stored and e.signature.op_pattern not in (REFERENCE_PATTERN, PRICES_PATTERN)}
    assert kernels == {k["key"] for k in first.kernels}

    def untimed(self, *_):
        raise AssertionError("a choice in the cache is not timed again")

    monkeypatch.setattr(_Compilation, "_time_choice", untimed)
    again = compile_model(_model(), "cpu", {"threads": 1}, cache=cache, output=tmp_path / "b.tar.gz")
    assert again.report["choices"] == [record] and _winograd_kernels(again) == record["taken"]
    assert again.cache_misses == 0


@pytest.mark.parametrize("options", [{"measure": False}, {"threads": 1, "measure": False}])
def test_without_measuring_the_frontend_guess_stands(tmp_path, monkeypatch, options):
    monkeypatch.setattr(_Compilation, "_time_choice", lambda self, *_: pytest.fail("timed"))
    result = compile_model(_model(), "cpu", options, output=tmp_path / "m.tar.gz")
    assert result.report["choices"] == [] and _winograd_kernels(result)


def test_a_lowering_that_fails_to_build_leaves_the_other_untimed_and_uncached(tmp_path, monkeypatch):
    """The op alone failing one way (here: the Winograd build) is no error of the user's
    model: the other lowering is taken, the failure said, and the answer not kept (the
    failure may be the toolchain's of the moment)."""
    real = compiler.pipeline._build

    def winograd_fails(model, target, options, cache, progress, choose, *rest, **kw):
        if choose is not None and choose(None):
            raise BuildError("gcc: out of memory")
        return real(model, target, options, cache, progress, choose, *rest, **kw)

    monkeypatch.setattr(compiler.pipeline, "_build", winograd_fails)
    cache = MemoryKernelCache()
    result = compile_model(_model(), "cpu", {"threads": 1}, cache=cache, output=tmp_path / "m.tar.gz")
    (record,) = result.report["choices"]
    assert record["taken"] is False and record["ms_with"] is None
    assert record["failed"] == {"with": "BuildError: gcc: out of memory"}
    assert not _winograd_kernels(result) and result.validation["passed"] is True
    assert not any(e.signature.op_pattern.startswith("choice:") for e in cache.entries().values())


@pytest.mark.nvcc
@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not installed")
def test_a_target_this_machine_cannot_run_keeps_the_guess(tmp_path, monkeypatch):
    """Choices are timed where kernels' candidates are (a device here for the target): a CUDA
    compile on a machine without a GPU still builds, with the frontend's guess."""
    if gpu_runs(get_target("cuda:a100").arch):
        pytest.skip("a GPU that runs sm_80 is present: the choice would be timed on it")
    monkeypatch.setattr(_Compilation, "_time_choice", lambda self, *_: pytest.fail("timed"))
    result = compile_model(_model(), "cuda:a100", {}, output=tmp_path / "m.tar.gz")
    assert result.report["choices"] == [] and _winograd_kernels(result)


def test_a_model_larger_than_the_caches_times_the_op_with_its_weights_out_of_cache() -> None:
    """Copies of the op, each with weights of its own, overflow the last cache where the
    model's weights do (timed alone, an op finds its weights in cache; in such a model it
    does not); one copy where the model fits, or the target does not say its caches."""
    from compiler.pipeline import MAX_CHOICE_COPIES, choice_copies
    from compiler.target.base import MemoryLevel

    target = get_target("cpu:x86-64-v3")
    l3 = 32 << 20
    levels = (MemoryLevel("dram", 1 << 34, 2e10, 64, shared=True), MemoryLevel("l3", l3, 1e11, 64, shared=True),
              MemoryLevel("l2", 1 << 20, 1e11, 64))
    cached = dataclasses.replace(target, levels=levels)
    weights = 256 * 256 * 9 * 4  # 2.36 MB: 14 of them fit in 32 MiB, 15 overflow it
    assert choice_copies(weights, 46 << 20, cached) == 15 and 15 * weights > l3 > 14 * weights
    assert choice_copies(weights, 8 << 20, cached) == 1  # the model fits: its weights stay in cache
    assert choice_copies(64 * 64 * 9 * 4, 46 << 20, cached) == MAX_CHOICE_COPIES  # small weights: at most
    assert choice_copies(weights, 46 << 20, dataclasses.replace(target, levels=levels[:1])) == 1


def test_copies_are_timed_per_op_and_kept_apart_from_one_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(compiler.pipeline, "choice_copies", lambda *_: 3)
    cache = MemoryKernelCache()
    result = compile_model(_model(), "cpu", {"threads": 1}, cache=cache, output=tmp_path / "a.tar.gz")
    (record,) = result.report["choices"]
    assert record["copies"] == 3 and record["ms_with"] > 0 and record["ms_without"] > 0
    assert result.validation["passed"] is True
    (stored,) = [e for e in cache.entries().values() if e.signature.op_pattern == "choice:winograd"]
    assert stored.signature.shapes.endswith("copies3")  # an answer for one copy is another question



def test_copies_follow_the_caches_of_the_machine_that_times(monkeypatch, tmp_path) -> None:
    """A named CPU model's caches are not this host's: the copies a choice is timed on are
    sized by the host's, where the timing runs."""
    from compiler.target.cpu import detect_cpu, host_cannot_run

    preset = get_target("cpu:x86-64-v3")
    if host_cannot_run(preset):
        pytest.skip("this host does not run the x86-64-v3 preset's code")
    seen = []
    monkeypatch.setattr(compiler.pipeline, "choice_copies", lambda weights, size, target: seen.append(target) or 1)
    result = compile_model(_model(), "cpu:x86-64-v3", {"threads": 1}, output=tmp_path / "m.tar.gz")
    assert result.report["choices"] and seen
    assert all(t.levels == detect_cpu().levels for t in seen)


def test_a_choices_small_models_are_timed_as_validated_never_packed(tmp_path, monkeypatch) -> None:
    """Both lowerings' small models are validated and timed from memory: the one artifact
    written is the model's own (ResNet-18's eight small models had taken 2.4 s to pack and
    load again, their weights' copies deflated and inflated)."""
    packed = []
    real = compiler.pipeline._Compilation.package
    monkeypatch.setattr(compiler.pipeline._Compilation, "package",
                        lambda self, out, *a, **kw: packed.append(out) or real(self, out, *a, **kw))
    result = compile_model(_model(), "cpu", {"threads": 1}, output=tmp_path / "m.tar.gz")
    (record,) = result.report["choices"]
    assert record["ms_with"] > 0 and record["ms_without"] > 0 and record["failed"] == {}
    assert packed == [tmp_path / "m.tar.gz"] and result.validation["passed"] is True


def test_a_timing_starts_once_the_process_is_idle() -> None:
    """`_settle`, run before every timing of a compilation (a choice's warm-up included), waits
    while another thread of the process spins (OpenBLAS's workers after a matmul)."""
    import threading
    import time

    from compiler.pipeline import _settle

    started = threading.Event()

    def spin() -> None:
        started.set()
        end = time.perf_counter() + 0.15
        while time.perf_counter() < end:
            pass

    spinner = threading.Thread(target=spin)
    spinner.start()
    started.wait()
    t0 = time.perf_counter()
    _settle(None)
    waited = time.perf_counter() - t0
    spinner.join()
    assert 0.1 <= waited < 1.0


@pytest.mark.parametrize(("first", "second", "timings", "taken"), [
    ((1.00e-3, 0.95e-3), (1.00e-3, 1.20e-3), 2, False),  # close: timed again, judged on all runs
    ((1.00e-3, 0.60e-3), (1.00e-3, 1.20e-3), 1, True),   # decisive: one alternation
])
def test_lowerings_timed_close_are_timed_again_and_judged_on_all_runs(tmp_path, monkeypatch, first, second,
                                                                       timings, taken) -> None:
    """Within CHOICE_CLOSE of each other, one alternation's medians are no answer to keep in
    the cache: both lowerings are timed once more and the medians taken over all runs."""
    rounds = iter([first, second])
    calls = []

    def timer(fns, **_):
        calls.append(len(fns))
        without, with_ = next(rounds)
        return [[without] * 10, [with_] * 11]  # the second alternation's medians outweigh a tie

    monkeypatch.setattr(compiler.pipeline, "time_interleaved", timer)
    monkeypatch.setattr(compiler.pipeline, "choice_copies", lambda *_: 1)
    result = compile_model(_model(), "cpu", {"threads": 1}, output=tmp_path / "m.tar.gz")
    (record,) = result.report["choices"]
    assert calls == [2] * timings and record["taken"] is taken and record["failed"] == {}
