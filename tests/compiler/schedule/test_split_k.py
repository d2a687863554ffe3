"""Split-K (compiler/schedule/split_k.py): which contractions are cut and into how many
slices, that the partial sums and their sum compute what the contraction did (epilogue
included), and that the graph rewrite keeps ids, outputs and weights' constness. The two
kernels' CUDA renderings are checked with the other CUDA cases (codegen/cuda_cases.py) and
a split model's whole launch table in tests/compiler/runtime/test_cuda_run.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from compiler import frontend
from compiler.backends import backend_for
from compiler.backends.cuda import CudaBackend
from compiler.bench.models import small_map_head
from compiler.cache import MemoryKernelCache
from compiler.ir.graph import TensorKind
from compiler.ir.interp import evaluate
from compiler.ir.te import Axis, Compute, Load, TensorType, Var, call
from compiler.pipeline import _Compilation, compile_model, plan_fusion
from compiler.schedule.split_k import (
    SPLIT_LABEL,
    join_compute,
    split_compute,
    split_contractions,
    split_factor,
)
from compiler.target.registry import get_target
from compiler.target.toolchain import find_tool

H100 = get_target("cuda:h100")
ACC = Var("acc", "float32")


def conv(cin: int, cout: int, side: int, epilogue: bool = True) -> Compute:
    """3x3, pad 1 over NCHW, with bias + Relu + a residual input as its epilogue."""
    n, co, h, w, c, kh, kw = (Var(a) for a in ("n", "co", "h", "w", "c", "kh", "kw"))
    x = Load(0, (n, c, h + kh - 1, w + kw - 1), "float32", pad=0.0)
    post = call("max", ACC + Load(2, (co,), "float32"), 0.0) + Load(3, (n, co, h, w), "float32")
    inputs = (TensorType((1, cin, side, side), "float32"), TensorType((cout, cin, 3, 3), "float32"),
              TensorType((cout,), "float32"), TensorType((1, cout, side, side), "float32"))
    return Compute((Axis("n", 1), Axis("co", cout), Axis("h", side), Axis("w", side)),
                   x * Load(1, (co, c, kh, kw), "float32"), inputs if epilogue else inputs[:2], "float32",
                   (Axis("c", cin), Axis("kh", 3), Axis("kw", 3)), "sum", post if epilogue else None, "Conv")


def test_slices_fill_the_device_and_keep_long_slices() -> None:
    # ResNet-18's last stage: 25,088 outputs over K = 4,608 on 132 SMs
    assert split_factor(conv(512, 512, 7), 132) == 8
    assert split_factor(conv(256, 256, 14), 132) == 4
    # enough outputs to fill the device already: whole
    assert split_factor(conv(64, 64, 56), 132) == 1
    # fewer SMs fill sooner
    assert split_factor(conv(512, 512, 7), 16) == 1
    # a slice keeps at least MIN_SLICE_K multiply-adds per output
    assert split_factor(conv(32, 512, 7), 132) == 1
    # no contraction: a plain reduction is left alone
    rows = Compute((Axis("i", 4),), Load(0, (Var("i"), Var("k")), "float32"),
                   (TensorType((4, 4096), "float32"),), "float32", (Axis("k", 4096),), "sum")
    assert split_factor(rows, 132) == 1


@pytest.mark.parametrize("epilogue", [True, False])
def test_partial_sums_and_their_sum_compute_the_contraction(epilogue: bool) -> None:
    c = conv(32, 16, 5, epilogue)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(t.shape).astype(np.float32) for t in c.inputs]
    partial, total, partial_reads, total_reads = split_compute(c, 4)
    assert partial.shape == (4, *c.shape) and partial.reduce_axes[0].extent == 8
    assert partial_reads == (0, 1)  # the partial sums read the data and the weights alone
    assert total_reads == ((2, 3) if epilogue else ())
    assert total.label == SPLIT_LABEL and total.shape == c.shape
    parts = evaluate(partial, [inputs[p] for p in partial_reads])
    got = evaluate(total, [parts, *(inputs[p] for p in total_reads)])
    np.testing.assert_allclose(got, evaluate(c, inputs), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="do not divide"):
        split_compute(c, 3)


def test_the_rewrite_splits_weight_contractions_and_keeps_ids_and_outputs() -> None:
    graph = frontend.import_model(small_map_head().SerializeToString())
    before = {n.id: n for n in graph.nodes}
    outputs = {n.output for n in graph.nodes}
    assert len(split_contractions(graph, H100.units)) == 2  # the convolution and the classifier
    ids = [n.id for n in graph.nodes]
    assert len(ids) == len(set(ids)) == len(before) + 2
    sums = [n for n in graph.nodes if n.op == SPLIT_LABEL]
    assert {n.output for n in sums} <= outputs and all(n.id in before for n in sums)
    position = {n.output: k for k, n in enumerate(graph.nodes)}
    for s in sums:
        partial = graph.tensors[s.inputs[0]]
        assert partial.kind == TensorKind.INTERMEDIATE and position[partial.id] < position[s.output]
        # the epilogue's bias is still read from the weights
        assert all(graph.tensors[t].kind == TensorKind.WEIGHT for t in s.inputs[1:])
    slices = sorted(graph.tensors[s.inputs[0]].shape[0] for s in sums)
    assert slices == [2, 8]  # conv: K 576 -> 2 x 288; classifier: K 2048 -> 8 x 256


def test_a_product_of_two_activations_is_left_whole() -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("a", TensorProto.FLOAT, [8, 4096])
    y = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4096, 8])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 8])
    model = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g", [x, y], [out]),
                              opset_imports=[helper.make_opsetid("", 17)])
    graph = frontend.import_model(model.SerializeToString())
    assert split_factor(graph.nodes[0].compute, H100.units) > 1  # its shape alone would split
    assert split_contractions(graph, H100.units) == {}


def test_only_the_cuda_backend_splits() -> None:
    for target, splits in (("cpu", False), ("cuda:h100", True)):
        graph = frontend.import_model(small_map_head().SerializeToString())
        backend_for(get_target(target)).split_reductions(graph, get_target(target))
        assert any(n.op == SPLIT_LABEL for n in graph.nodes) == splits


def test_the_split_k_option_turns_it_off() -> None:
    # the convolution and the classifier: two kernels more with it, none without
    on = plan_fusion(small_map_head(), "cuda:h100")
    off = plan_fusion(small_map_head(), "cuda:h100", {"split_k": False})
    assert on["kernels_fused"] == off["kernels_fused"] + 2


@pytest.mark.parametrize("epilogue", [True, False])
def test_joining_undoes_the_split(epilogue: bool) -> None:
    c = conv(32, 16, 5, epilogue)
    partial, total, _, _ = split_compute(c, 4)
    # the very Compute that was cut (so a kernel cache knows it again)
    assert join_compute(partial, total) == c
    # a sum that is no longer a plain sum of the slices is not joined
    assert join_compute(partial, dataclasses.replace(total, reduce_op="max")) is None


class _StandInGpu:
    """The CUDA backend's device for the pipeline, here: present, with a timer that says
    which plan is faster (the kernels are built by the real nvcc, never run)."""

    def __init__(self, whole_faster: bool) -> None:
        self.whole_faster = whole_faster

    def time(self, timings, target, opts):
        def us(c: Compute) -> float:
            split = c.label.startswith(SPLIT_LABEL) or c.axes[0].name.startswith("ks")
            return (100.0 if split else 10.0) if self.whole_faster else (1.0 if split else 500.0)
        return {t.key: [us(t.kernel.compute)] * len(t.tiles) for t in timings}


@pytest.mark.nvcc
@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc (the CUDA toolkit) is not installed")
@pytest.mark.parametrize("whole_faster", [True, False])
def test_a_split_timed_slower_is_planned_whole(monkeypatch: pytest.MonkeyPatch, tmp_path, whole_faster: bool) -> None:
    gpu = _StandInGpu(whole_faster)
    monkeypatch.setattr(CudaBackend, "device_present", lambda self, target: True)
    monkeypatch.setattr(CudaBackend, "time_candidates", lambda self, *a: gpu.time(*a))
    monkeypatch.setattr(_Compilation, "choose", lambda self, choice: choice.default)  # no lowering timed
    cache = MemoryKernelCache()
    kept = "whole" if whole_faster else "split"
    for by in ("timed", "cache"):  # a second compile keeps the first one's verdict, untimed
        result = compile_model(small_map_head(), "cuda:h100", {"validate": False}, cache=cache,
                               output=tmp_path / f"{by}.tar.gz")
        assert [(v["kept"], v["by"]) for v in result.report["split_k"]] == [(kept, by)] * 2
        split_kernels = [k for k in result.plan.kernels if k.compute.label.startswith(SPLIT_LABEL)]
        assert len(split_kernels) == (0 if whole_faster else 2)
    assert result.cache_misses == 0
