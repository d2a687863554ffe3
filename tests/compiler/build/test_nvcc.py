"""The CUDA toolchain compiles a cubin (nvcc only, no GPU needed)."""

from __future__ import annotations

import pytest

from compiler.build.nvcc import compile_cubin, nvcc_version
from compiler.errors import BuildError
from compiler.target.toolchain import find_tool

pytestmark = pytest.mark.nvcc
needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None,
                                reason="nvcc is not installed")


@needs_nvcc
def test_cubin_is_an_elf_for_the_arch() -> None:
    cubin = compile_cubin('extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }', "sm_80")
    assert cubin.startswith(b"\x7fELF")
    assert "nvcc" in nvcc_version()


@needs_nvcc
def test_cuda_compile_error_is_a_build_error() -> None:
    with pytest.raises(BuildError, match="nvcc failed"):
        compile_cubin('extern "C" __global__ void k() { nope(); }', "sm_80")


def test_bad_arch_is_refused_before_running() -> None:
    with pytest.raises(BuildError, match="architecture"):
        compile_cubin("", "sm_80; rm -rf /")
