"""The CUDA kernel of a fused attention group (compiler/codegen/cuda/attention.py), made by
the CUDA backend's partition and tiled by its cost model: on the CPU emulator of the CUDA
built-ins, every variant the C kernel supports (GQA, causal, padding and boolean masks,
transposed keys, heads merged back in place, a sequence no multiple of the blocks, rows
whose keys are all masked) matches the unfused graph run by the TE interpreter; the
kernels compile with nvcc for sm_80 and sm_90, and the pipeline builds attention blocks
with one such kernel (validated against onnxruntime where a GPU runs them)."""

from __future__ import annotations

import copy
import dataclasses
import math
import shutil
import tarfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
from cuda_device import device_arch
from cuda_emulator import EmulatedKernels

from compiler.backends import backend_for
from compiler.bench.attention_blocks import bert_attention, llama_attention
from compiler.build.nvcc import compile_cubin
from compiler.codegen.cuda.kernel import render_kernel
from compiler.frontend import import_model
from compiler.ir.attention import match_attention
from compiler.ir.graph import Graph
from compiler.ir.graph_interp import run_graph
from compiler.ir.interp import evaluate
from compiler.ir.te import Compute
from compiler.pipeline import compile_model
from compiler.schedule.cuda_attention_tile import cuda_attention_tilings, smem_bytes
from compiler.schedule.cuda_launch import WARP, AttentionGeometry
from compiler.schedule.cuda_tile import SMEM_LIMIT, plan_cuda_tile
from compiler.schedule.plan import TileConfig
from compiler.schedule.tilegraph.registers import fuse
from compiler.target import get_target
from compiler.target.toolchain import find_tool
from tests.compiler.attention_kit import attention_feeds, attention_model

GPU = get_target("cuda:a100")

MODELS = {
    "padding_mask": lambda: attention_model(batch=2, heads=3, seq=7, head_dim=24),
    "long_padding_mask": lambda: attention_model(batch=1, heads=2, seq=200, head_dim=64),
    "causal_trilu": lambda: attention_model(heads=2, seq=70, head_dim=32, mask="causal_trilu"),
    "causal_where": lambda: attention_model(heads=2, seq=37, head_dim=32, mask="causal_where"),
    "additive_mask": lambda: attention_model(heads=2, seq=45, head_dim=16, mask="additive"),
    "gqa": lambda: attention_model(batch=2, heads=8, kv_heads=2, seq=37, head_dim=16, mask="causal_trilu"),
    "mqa_scaled_qk": lambda: attention_model(heads=4, kv_heads=1, seq=19, scale_on="qk"),
    "bool_mask_keys_transposed": lambda: attention_model(batch=2, seq=50, mask="bool", k_transposed=True),
    "more_keys_than_queries": lambda: attention_model(seq=33, keys=90, head_dim=64, scale_on="q", mask="none"),
    "decode_step": lambda: attention_model(seq=1, keys=33, mask="none"),
    "one_key": lambda: attention_model(seq=5, keys=1, mask="none"),
    "head_dim_80": lambda: attention_model(seq=21, heads=3, head_dim=80),
    "bert_block": lambda: bert_attention(seq=13, hidden=64, heads=4),
    "llama_gqa_block": lambda: llama_attention(seq=20, hidden=128, heads=8, kv_heads=2),
}
# boolean masks with every key of batch 1's rows masked: NaN as unfused, or 0 (torch's SDPA)
ALL_MASKED = {"all_masked": False, "all_masked_nan_to_zero": True}


@dataclasses.dataclass
class Partitioned:
    """A model's graph before and after the CUDA backend's partition, its one attention
    group and that group's best tile, and the inputs to run it on."""

    unfused: Graph
    fused: Graph
    group: Compute
    tile: TileConfig
    feeds: dict[str, np.ndarray]


def _feeds(m: onnx.ModelProto, graph: Graph) -> dict[str, np.ndarray]:
    if any(i.name in {"q", "k"} for i in m.graph.input):
        return attention_feeds(m)
    rng = np.random.default_rng(0)
    return {graph.tensors[t].name: rng.standard_normal(graph.tensors[t].shape).astype(np.float32)
            for t in graph.inputs}


def _partition(m: onnx.ModelProto) -> Partitioned:
    unfused = import_model(m.SerializeToString())
    fused = fuse(copy.deepcopy(unfused))
    backend_for(GPU).partition(fused, GPU)
    groups = [n.compute for n in fused.nodes if match_attention(n.compute) is not None]
    assert len(groups) == 1, [n.op for n in fused.nodes]
    parts = match_attention(groups[0])
    assert parts is not None
    (tile, _), = cuda_attention_tilings(groups[0], parts, GPU, 1)
    return Partitioned(unfused, fused, groups[0], plan_cuda_tile(groups[0], tile), _feeds(m, unfused))


def _all_masked(nan_to_zero: bool) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    m = attention_model(batch=2, seq=9, mask="bool", nan_to_zero=nan_to_zero)
    feeds = attention_feeds(m)
    feeds["bool_mask"][:] = False
    feeds["bool_mask"][0, ..., 0] = True  # batch 0's first key seen, so its rows are not all masked
    return m, feeds


@pytest.fixture(scope="module")
def cases() -> dict[str, Partitioned]:
    out = {name: _partition(make()) for name, make in MODELS.items()}
    for name, nan_to_zero in ALL_MASKED.items():
        m, feeds = _all_masked(nan_to_zero)
        out[name] = dataclasses.replace(_partition(m), feeds=feeds)
    return out


@pytest.fixture(scope="module")
def emulated(cases: dict[str, Partitioned], tmp_path_factory: pytest.TempPathFactory) -> EmulatedKernels:
    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++")
    kernels = {f"k{n}": (p.group, p.tile) for n, p in enumerate(cases.values())}
    return EmulatedKernels(kernels, Path(tmp_path_factory.mktemp("cuda_attention")))


@pytest.mark.parametrize("name", [*MODELS, *ALL_MASKED])
def test_emulated_kernel_matches_the_unfused_graph(cases: dict[str, Partitioned], emulated: EmulatedKernels,
                                                   name: str) -> None:
    p = cases[name]
    symbol = f"k{list(cases).index(name)}"

    def run(c: Compute, inputs: Sequence[np.ndarray]) -> np.ndarray:
        return emulated.run(symbol, inputs) if c is p.group else evaluate(c, inputs)

    want = run_graph(p.unfused, p.feeds)
    got = run_graph(p.fused, p.feeds, run)
    for out, ref in want.items():
        np.testing.assert_allclose(got[out], ref, rtol=1e-5, atol=1e-6)  # NaN where the reference is NaN
    if name in ALL_MASKED:
        assert np.isnan(next(iter(want.values()))).any() != ALL_MASKED[name]


@pytest.mark.parametrize("name", ["padding_mask", "causal_where", "gqa"])
def test_every_block_shape_the_model_ranks_computes_the_same(cases: dict[str, Partitioned], name: str,
                                                              tmp_path: Path) -> None:
    """Not only the model's favourite: each ranked block shape (a grid of 2 blocks, so the
    blocks also walk their tasks grid-stride) gives the unfused graph's output."""
    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++")
    p = cases[name]
    parts = match_attention(p.group)
    assert parts is not None
    tilings = [plan_cuda_tile(p.group, t) for t, _ in cuda_attention_tilings(p.group, parts, GPU, 4)]
    kernels = EmulatedKernels({f"t{n}": (p.group, t) for n, t in enumerate(tilings)}, tmp_path, max_grid=2)
    want = run_graph(p.unfused, p.feeds)
    for n in range(len(tilings)):
        got = run_graph(p.fused, p.feeds, lambda c, x, n=n: kernels.run(f"t{n}", x) if c is p.group else evaluate(c, x))
        for out, ref in want.items():
            np.testing.assert_allclose(got[out], ref, rtol=1e-5, atol=1e-6)


def test_blocks_fit_shared_memory_and_whole_warps(cases: dict[str, Partitioned]) -> None:
    for p in cases.values():
        parts = match_attention(p.group)
        assert parts is not None and p.tile.launch is not None and p.tile.launch.kind == "attention"
        g = p.tile.launch.geometry
        assert isinstance(g, AttentionGeometry) and (g.bq, g.bk, g.rows) == p.tile.attention
        assert g.threads % WARP == 0 and g.bk % g.team == 0 and WARP % g.team == 0
        assert smem_bytes(parts, g) <= SMEM_LIMIT
        assert p.tile.launch.block == (g.threads, 1, 1)
        assert p.tile.launch.grid == (math.prod(parts.batch) * -(-parts.queries // g.bq), 1, 1)
        assert TileConfig.from_json(p.tile.to_json()) == p.tile


@pytest.mark.nvcc
@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc (the CUDA toolkit) is not installed")
def test_kernels_compile_for_sm_80_and_sm_90(cases: dict[str, Partitioned]) -> None:
    source = "\n".join(render_kernel(p.group, p.tile, f"k{n}") for n, p in enumerate(cases.values()))
    with ThreadPoolExecutor(2) as pool:
        cubins = list(pool.map(lambda arch: compile_cubin(source, arch), ("sm_80", "sm_90")))
    for cubin in cubins:
        assert cubin[:4] == b"\x7fELF"
        assert all(f"k{n}".encode() + b"\0" in cubin for n in range(len(cases)))


@pytest.mark.nvcc
@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc (the CUDA toolkit) is not installed")
@pytest.mark.parametrize("make", [lambda: bert_attention(seq=13, hidden=64, heads=4),
                                  lambda: llama_attention(seq=20, hidden=128, heads=8, kv_heads=2)],
                         ids=["bert", "llama_gqa"])
def test_the_pipeline_builds_a_block_as_its_projections_and_one_attention_kernel(make, tmp_path: Path) -> None:
    r = compile_model(make(), "cuda:h100", {"measure": False}, output=tmp_path / "a.tar.gz")
    kinds = [k.tile.launch.kind for k in r.plan.kernels if k.tile.launch is not None]
    # Q, K, V and output projections; the heads' split and merge are read and written in place
    assert len(r.plan.kernels) == 5 and kinds.count("attention") == 1
    with tarfile.open(r.artifact_path) as tar:
        assert tar.extractfile("model.cubin").read()[:4] == b"\x7fELF"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["long_padding_mask", "causal_trilu", "gqa", "bool_mask_keys_transposed",
                                  "head_dim_80", "llama_gqa_block"])
def test_on_the_gpu_the_pipeline_validates_against_onnxruntime(name: str, tmp_path: Path) -> None:
    arch, why_not = device_arch()
    if arch is None:
        pytest.skip(why_not)
    r = compile_model(MODELS[name](), f"cuda:{arch}", output=tmp_path / "a.tar.gz")
    assert r.validation["passed"] is True, r.validation
    assert [k.tile.launch.kind for k in r.plan.kernels if k.tile.launch is not None].count("attention") == 1
