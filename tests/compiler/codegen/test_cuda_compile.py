"""Every generated CUDA kernel compiles with nvcc to a cubin for sm_80 and sm_90: the
hand-built cases (float16 included) and every kernel of the zoo models (partitioned as
the pipeline does for CUDA, attention and row groups included), tiled by Roller's
construction for the H100 preset. One translation unit per architecture, both compiled
at once, keeps nvcc's start-up cost to two runs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from cuda_cases import ALL_CASES, GPU, tile_for

from compiler import frontend
from compiler.backends import backend_for
from compiler.bench.models import ZOO, small_map_head
from compiler.build.nvcc import compile_cubin
from compiler.codegen.cuda.kernel import render_kernel
from compiler.ir.te import Compute
from compiler.schedule.cuda_tile import plan_cuda_tile
from compiler.schedule.rtile import construct
from compiler.schedule.tilegraph.registers import fuse
from compiler.target.toolchain import find_tool

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc (the CUDA toolkit) is not installed"),
]
ARCHS = ("sm_80", "sm_90")


MODELS = {**ZOO, "small_map_head": small_map_head}  # the zoo, and a model split-K cuts


def _zoo_computes() -> list[Compute]:
    """The distinct fused Computes of every zoo model (and `small_map_head`'s)."""
    seen: dict[str, Compute] = {}
    for name in sorted(MODELS):
        graph = frontend.import_model(MODELS[name]().SerializeToString())
        backend_for(GPU).split_reductions(graph, GPU)  # the pipeline's CUDA partition
        backend_for(GPU).partition(fuse(graph), GPU)
        for node in graph.nodes:
            seen.setdefault(node.compute.canonical(), node.compute)
    return list(seen.values())


@pytest.fixture(scope="module")
def translation_unit() -> dict[str, str]:
    """symbol -> kernel source, for the cases and the zoo."""
    kernels = {f"case{n}": render_kernel(case[0], tile_for(case), f"case{n}")
               for n, case in enumerate(ALL_CASES.values())}
    for n, c in enumerate(_zoo_computes()):
        kernels[f"zoo{n}"] = render_kernel(c, plan_cuda_tile(c, construct(c, GPU)[0].tile), f"zoo{n}")
    return kernels


@pytest.fixture(scope="module")
def cubins(translation_unit: dict[str, str]) -> dict[str, bytes]:
    source = "\n".join(translation_unit.values())
    with ThreadPoolExecutor(len(ARCHS)) as pool:
        return dict(zip(ARCHS, pool.map(lambda arch: compile_cubin(source, arch), ARCHS), strict=True))


@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_compiles_to_a_cubin(cubins: dict[str, bytes], translation_unit: dict[str, str],
                                          arch: str) -> None:
    cubin = cubins[arch]
    assert cubin[:4] == b"\x7fELF"
    missing = [sym for sym in translation_unit if sym.encode() + b"\0" not in cubin]
    assert not missing, f"kernels absent from the {arch} cubin: {missing}"


def test_zoo_kernels_use_every_kernel_kind(translation_unit: dict[str, str]) -> None:
    zoo = [src for sym, src in translation_unit.items() if sym.startswith("zoo")]
    assert any("__shared__" in s and "sa[" in s for s in zoo)  # tiled GEMM
    assert any("tf_shfl_xor(acc" in s for s in zoo)  # row reduction
    assert any("__shared__" not in s for s in zoo)  # general
    assert any("dst + row *" in s for s in zoo)  # fused row group
    assert any("sp[trow" in s for s in zoo)  # fused attention (the transformer encoder's)
