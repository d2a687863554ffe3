"""The CUDA toolchain: one CUDA C source to a cubin for one architecture."""

from __future__ import annotations

import re

from compiler.build.sandbox import Limits, run_tool
from compiler.errors import BuildError
from compiler.target.toolchain import nvcc_version

__all__ = ["compile_cubin", "nvcc_version"]

NVCC = "nvcc"
_ARCH = re.compile(r"sm_[0-9]{2,3}[a-z]?")
# cicc and ptxas reserve more address space than gcc does.
NVCC_LIMITS = Limits(timeout_s=300.0, memory_bytes=16 << 30)


def compile_cubin(source: str, arch: str, flags: tuple[str, ...] = ("-O3",)) -> bytes:
    """Compile CUDA C to a cubin for `arch` (e.g. "sm_90")."""
    if not _ARCH.fullmatch(arch):
        raise BuildError(f"bad CUDA architecture {arch!r} (expected e.g. sm_90)")
    argv = [NVCC, "-cubin", f"-arch={arch}", *flags, "-o", "k.cubin", "k.cu"]
    return run_tool(argv, {"k.cu": source}, ["k.cubin"], NVCC_LIMITS).files["k.cubin"]
