"""NVIDIA GPU presets from public datasheets.

Peaks are dense (no structured sparsity); tensor-core fp16/bf16 peaks use
fp32 accumulation where the datasheet gives both. Datasheets do not list L2
bandwidth: those numbers are approximations from published microbenchmarks
and matter only for ranking tiles. Shared-memory bandwidth is 32 banks x 4 B
per SM per clock; register bandwidth three 4-byte operands per FP32 lane per
clock.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from compiler.target.base import MemoryLevel, Target
from compiler.target.toolchain import nvcc_version

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
T = 1e12


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet numbers of one GPU model."""

    key: str
    arch: str
    sms: int
    clock_ghz: float  # boost
    fp32_lanes_per_sm: int
    dram_bytes: int
    dram_bw: float
    l2_bytes: int
    l2_bw: float
    smem_per_sm: int
    smem_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    fp32: float
    fp64: float
    fp16: float  # CUDA cores, not tensor cores
    fp16_tensor: float
    bf16_tensor: float  # 0 where the architecture has none


SPECS: tuple[GpuSpec, ...] = (
    GpuSpec("v100", "sm_70", 80, 1.53, 64, 32 * GB, 900e9, 6 * MB, 2.5 * T,
            96 * KB, 96 * KB, 2048, 32, 15.7 * T, 7.8 * T, 31.4 * T, 125 * T, 0),
    GpuSpec("t4", "sm_75", 40, 1.59, 64, 16 * GB, 320e9, 4 * MB, 1.2 * T,
            64 * KB, 64 * KB, 1024, 16, 8.1 * T, 0.25 * T, 16.2 * T, 65 * T, 0),
    GpuSpec("a100", "sm_80", 108, 1.41, 64, 80 * GB, 2039e9, 40 * MB, 5.0 * T,
            164 * KB, 163 * KB, 2048, 32, 19.5 * T, 9.7 * T, 78 * T, 312 * T, 312 * T),
    GpuSpec("a10", "sm_86", 72, 1.695, 128, 24 * GB, 600e9, 6 * MB, 2.0 * T,
            100 * KB, 99 * KB, 1536, 16, 31.2 * T, 0.98 * T, 31.2 * T, 125 * T, 125 * T),
    GpuSpec("l4", "sm_89", 58, 2.04, 128, 24 * GB, 300e9, 48 * MB, 2.0 * T,
            100 * KB, 99 * KB, 1536, 24, 30.3 * T, 0.49 * T, 30.3 * T, 121 * T, 121 * T),
    GpuSpec("rtx3090", "sm_86", 82, 1.695, 128, 24 * GB, 936e9, 6 * MB, 2.5 * T,
            100 * KB, 99 * KB, 1536, 16, 35.6 * T, 0.56 * T, 35.6 * T, 71 * T, 71 * T),
    GpuSpec("rtx4090", "sm_89", 128, 2.52, 128, 24 * GB, 1008e9, 72 * MB, 5.0 * T,
            100 * KB, 99 * KB, 1536, 24, 82.6 * T, 1.29 * T, 82.6 * T, 165.2 * T, 165.2 * T),
    GpuSpec("h100", "sm_90", 132, 1.98, 128, 80 * GB, 3350e9, 50 * MB, 7.0 * T,
            228 * KB, 227 * KB, 2048, 32, 67 * T, 34 * T, 133.8 * T, 989.4 * T, 989.4 * T),
    GpuSpec("h200", "sm_90", 132, 1.98, 128, 141 * GB, 4800e9, 50 * MB, 7.0 * T,
            228 * KB, 227 * KB, 2048, 32, 67 * T, 34 * T, 133.8 * T, 989.4 * T, 989.4 * T),
)

# The preset an arch alias (`cuda:sm_86`) stands for: the datacenter part of that arch.
CANONICAL_BY_ARCH = {"sm_70": "v100", "sm_75": "t4", "sm_80": "a100", "sm_86": "a10",
                     "sm_89": "l4", "sm_90": "h100"}

WARP = 32
BANKS = 32
REGISTERS_PER_SM = 65536
MAX_THREADS_PER_BLOCK = 1024
MAX_REGISTERS_PER_THREAD = 255
# Shared memory a block may use without opting in (cudaFuncAttributeMaxDynamicSharedMemorySize).
SMEM_STATIC_PER_BLOCK = 48 * KB


def compute_capability(arch: str) -> str:
    """"sm_90" -> "9.0", "sm_90a" -> "9.0"."""
    digits = "".join(ch for ch in arch.removeprefix("sm_") if ch.isdigit())
    return f"{digits[:-1]}.{digits[-1]}"


def gpu_target(spec: GpuSpec, toolchain: str) -> Target:
    """The Target of one GPU model; levels DRAM -> L2 -> shared memory -> registers."""
    hz = spec.clock_ghz * 1e9
    levels = (
        MemoryLevel("dram", spec.dram_bytes, spec.dram_bw, 32, shared=True),
        MemoryLevel("l2", spec.l2_bytes, spec.l2_bw, 32, shared=True),
        MemoryLevel("smem", spec.smem_per_sm, spec.sms * BANKS * 4 * hz, 4),
        MemoryLevel("reg", REGISTERS_PER_SM * 4, spec.sms * spec.fp32_lanes_per_sm * 12 * hz, 4),
    )
    peaks = {"float32": spec.fp32, "float64": spec.fp64, "float16": spec.fp16,
             "float16_tensor": spec.fp16_tensor}
    if spec.bf16_tensor:
        peaks["bfloat16_tensor"] = spec.bf16_tensor
    return Target(
        name=f"cuda:{spec.key}", kind="cuda", arch=spec.arch, levels=levels, units=spec.sms,
        lanes=WARP, banks=BANKS, registers=REGISTERS_PER_SM, peak_flops=peaks,
        features=("tensor_cores",), toolchain=toolchain,
        extras={
            "compute_capability": compute_capability(spec.arch),
            "max_threads_per_block": MAX_THREADS_PER_BLOCK,
            "max_threads_per_sm": spec.max_threads_per_sm,
            "max_blocks_per_sm": spec.max_blocks_per_sm,
            "max_registers_per_thread": MAX_REGISTERS_PER_THREAD,
            "smem_per_block": spec.smem_per_block,
            "smem_static_per_block": min(SMEM_STATIC_PER_BLOCK, spec.smem_per_block),
            "clock_ghz": spec.clock_ghz,
        },
    )


def cuda_presets() -> dict[str, GpuSpec]:
    """Preset name (`cuda:h100`) -> spec."""
    return {f"cuda:{s.key}": s for s in SPECS}


def preset_for_device(device_name: str, capability: tuple[int, int]) -> str:
    """The `cuda:` target for a GPU the driver names `device_name`: the preset whose key is
    one of the name's words, or two adjacent ones ("NVIDIA H100 80GB HBM3" is `cuda:h100`,
    "NVIDIA GeForce RTX 4090" `cuda:rtx4090`) and whose arch is the device's; otherwise
    the device's arch (`cuda:sm_89`)."""
    words = re.findall(r"[a-z0-9]+", device_name.lower())
    names = {*words, *(a + b for a, b in itertools.pairwise(words))}
    arch = f"sm_{capability[0]}{capability[1]}"
    for spec in SPECS:
        if spec.key in names and spec.arch == arch:
            return f"cuda:{spec.key}"
    return f"cuda:{arch}"


def cuda_target(name: str) -> Target | None:
    """`cuda:<model>` or `cuda:<arch>` (the arch's canonical preset); None when unknown."""
    key = name.lower().removeprefix("cuda:")
    key = CANONICAL_BY_ARCH.get(key, key)
    spec = cuda_presets().get(f"cuda:{key}")
    return None if spec is None else gpu_target(spec, nvcc_version())
