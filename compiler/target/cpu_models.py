"""CPU targets users can name: ISA baselines (`cpu:x86-64-v3`) and microarchitectures
(`cpu:sapphirerapids`), each with the gcc flags that build for it and the ISA features
a host must have to run what those flags build.

`features` lists, in /proc/cpuinfo spelling, every extension gcc may emit code for
under the model's flags (the `-march` level's predefined `__AVX2__`-style macros,
checked by a test). Extensions gcc only reaches through intrinsics the kernels never
use (AMX, WAITPKG, AES, SHA, ADX, RDSEED, carry-less multiply) are not listed, so a host
without them still runs the build: hypervisors commonly hide RDSEED, and a Zen 4 or 5
virtual machine must still run what `cpu:znver4` builds.

gcc 12 has no `-march=znver4`; Zen 4 is Zen 3 plus the AVX-512 extensions Zen 4 has,
spelled out, which builds the same instructions on every gcc that knows them.
"""

from __future__ import annotations

from dataclasses import dataclass

_V2 = ("cx16", "lahf_lm", "pni", "popcnt", "sse2", "sse4_1", "sse4_2", "ssse3")
_V3 = (*_V2, "abm", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave")
_V4 = (*_V3, "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")
# What Ice Lake and later Intel servers add to x86-64-v4 that gcc may emit.
_ICELAKE = (*_V4, "avx512_bitalg", "avx512_vbmi2", "avx512_vnni", "avx512_vpopcntdq", "avx512ifma",
            "avx512vbmi", "gfni")
_SAPPHIRE = (*_ICELAKE, "avx512_bf16", "avx512_fp16", "avx_vnni")
_ZEN3 = (*_V3, "sse4a")
_ZEN4 = (*_ZEN3, "avx512_bf16", "avx512_bitalg", "avx512_vbmi2", "avx512_vnni", "avx512_vpopcntdq",
         "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512ifma", "avx512vbmi", "avx512vl", "gfni")
_ZEN4_FLAGS = ("-march=znver3", "-mavx512f", "-mavx512cd", "-mavx512bw", "-mavx512dq", "-mavx512vl",
               "-mavx512ifma", "-mavx512vbmi", "-mavx512vbmi2", "-mavx512vnni", "-mavx512bitalg",
               "-mavx512vpopcntdq", "-mavx512bf16", "-mgfni")


@dataclass(frozen=True)
class CpuModel:
    """A CPU target by name: its gcc flags, required ISA features and typical caches.

    Caches are per core (L3 for the whole chip); the scheduler tiles for them, so a
    named target compiles to the same plan on every host.
    """

    name: str
    machine: str
    gcc_flags: tuple[str, ...]
    features: tuple[str, ...]
    l1: int
    l2: int
    l3: int
    clock_ghz: float
    description: str


_KIB, _MIB = 1 << 10, 1 << 20

CPU_MODELS: dict[str, CpuModel] = {m.name: m for m in (
    CpuModel("x86-64-v2", "x86_64", ("-march=x86-64-v2", "-mtune=generic"), _V2, 32 * _KIB, 256 * _KIB,
             8 * _MIB, 2.5, "any x86-64 from 2009 on (SSE4.2, no AVX): the widest reach"),
    CpuModel("x86-64-v3", "x86_64", ("-march=x86-64-v3", "-mtune=generic"), _V3, 32 * _KIB, 1 * _MIB,
             16 * _MIB, 3.0, "AVX2 + FMA: Intel Haswell (2013) and AMD Zen 1 on; most laptops and clouds"),
    CpuModel("x86-64-v4", "x86_64", ("-march=x86-64-v4", "-mtune=generic"), _V4, 32 * _KIB, 1 * _MIB,
             32 * _MIB, 3.0, "AVX-512 (F, BW, CD, DQ, VL): Intel Skylake-SP and AMD Zen 4 on"),
    CpuModel("icelake-server", "x86_64", ("-march=icelake-server",), _ICELAKE, 48 * _KIB,
             1280 * _KIB, 48 * _MIB, 3.0, "Intel Xeon 3rd generation (Ice Lake-SP)"),
    CpuModel("sapphirerapids", "x86_64", ("-march=sapphirerapids",), _SAPPHIRE, 48 * _KIB, 2 * _MIB,
             64 * _MIB, 3.0, "Intel Xeon 4th / 5th generation (Sapphire / Emerald Rapids)"),
    CpuModel("znver4", "x86_64", (*_ZEN4_FLAGS, "-mtune=znver3"), _ZEN4, 32 * _KIB, 1 * _MIB,
             32 * _MIB, 3.5, "AMD Zen 4 (EPYC 9004, Ryzen 7000)"),
)}


def cpu_model(name: str) -> CpuModel | None:
    """The named CPU model (`x86-64-v3`, any case), or None."""
    return CPU_MODELS.get(name.strip().lower())


def model_of_target(target: str) -> CpuModel | None:
    """The CPU model a target name asks for (`cpu:x86-64-v3`, any case), else None."""
    kind, _, name = target.partition(":")
    return cpu_model(name) if kind.strip().lower() == "cpu" and name else None
