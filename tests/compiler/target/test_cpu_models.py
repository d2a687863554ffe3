"""Named CPU targets: their gcc flags enable exactly the ISA features they list, and they
compile to the same plan whatever host compiles them."""

from __future__ import annotations

import re
import subprocess

import pytest

from compiler.build.gcc import c_flags
from compiler.errors import TargetError
from compiler.target import get_target, list_targets
from compiler.target.cpu import host_cannot_run
from compiler.target.cpu_models import CPU_MODELS

# gcc's predefined macro for an ISA extension -> its /proc/cpuinfo flag: every extension
# gcc may emit code for without intrinsics.
MACRO_FEATURE = {
    "__SSE2__": "sse2", "__SSE3__": "pni", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4_1",
    "__SSE4_2__": "sse4_2", "__SSE4A__": "sse4a", "__POPCNT__": "popcnt", "__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16": "cx16",
    "__LAHF_SAHF__": "lahf_lm", "__AVX__": "avx", "__AVX2__": "avx2", "__FMA__": "fma", "__F16C__": "f16c",
    "__BMI__": "bmi1", "__BMI2__": "bmi2", "__LZCNT__": "abm", "__MOVBE__": "movbe", "__XSAVE__": "xsave",
    "__AVX512F__": "avx512f", "__AVX512BW__": "avx512bw", "__AVX512CD__": "avx512cd",
    "__AVX512DQ__": "avx512dq", "__AVX512VL__": "avx512vl", "__AVX512IFMA__": "avx512ifma",
    "__AVX512VBMI__": "avx512vbmi", "__AVX512VBMI2__": "avx512_vbmi2", "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BITALG__": "avx512_bitalg", "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq",
    "__AVX512BF16__": "avx512_bf16", "__AVX512FP16__": "avx512_fp16", "__AVXVNNI__": "avx_vnni",
    "__GFNI__": "gfni",
}
# Extensions gcc reaches only through their intrinsics, which the kernels never call: not
# required of a host (a virtual machine may hide RDSEED on a CPU that has it).
INTRINSIC_ONLY = {"__VAES__": "vaes", "__VPCLMULQDQ__": "vpclmulqdq", "__PCLMUL__": "pclmulqdq", "__AES__": "aes",
                  "__SHA__": "sha_ni", "__ADX__": "adx", "__RDSEED__": "rdseed"}


def _gcc_macros(flags: tuple[str, ...]) -> set[str]:
    isa = [f for f in flags if f.startswith("-m")]
    out = subprocess.run(["gcc", *isa, "-dM", "-E", "-x", "c", "/dev/null"], capture_output=True,
                         text=True, check=True).stdout
    return set(re.findall(r"#define (\w+)", out))


@pytest.mark.parametrize("name", sorted(CPU_MODELS))
def test_listed_features_are_exactly_what_the_flags_enable(name: str) -> None:
    model = CPU_MODELS[name]
    enabled = {feature for macro, feature in MACRO_FEATURE.items() if macro in _gcc_macros(model.gcc_flags)}
    assert enabled == set(model.features), f"{name}: listed but not enabled {sorted(set(model.features) - enabled)}, " \
                                           f"enabled but not listed {sorted(enabled - set(model.features))}"
    assert not set(model.features) & set(INTRINSIC_ONLY.values())


def test_named_targets_are_listed_and_resolve_case_insensitively() -> None:
    names = list_targets()
    for model in ("x86-64-v2", "x86-64-v3", "x86-64-v4", "sapphirerapids", "znver4", "icelake-server"):
        assert f"cpu:{model}" in names
    target = get_target("CPU:X86-64-V3")
    assert target.name == "cpu:x86-64-v3" and target.lanes == 8 and "avx512f" not in target.features
    assert get_target("cpu:x86-64-v4").lanes == 16
    assert get_target("cpu:x86-64-v2").lanes == 4
    with pytest.raises(TargetError, match=r"unknown target 'cpu:pentium4'.*cpu:x86-64-v3"):
        get_target("cpu:pentium4")


def test_fingerprints_carry_the_isa() -> None:
    prints = {get_target(n).fingerprint() for n in list_targets() if n.startswith("cpu")}
    assert len(prints) == len([n for n in list_targets() if n.startswith("cpu")])


def test_flags_are_the_models_and_not_the_hosts() -> None:
    flags = c_flags(get_target("cpu:x86-64-v3"))
    assert "-march=x86-64-v3" in flags and "-march=native" not in flags
    assert "-march=native" in c_flags(get_target("cpu"))


def test_plan_inputs_do_not_depend_on_the_host() -> None:
    """Caches, lanes, features and peak numbers of a named target come from its model; only
    the core count (the threads a job schedules for) is the host's."""
    target = get_target("cpu:sapphirerapids")
    assert target.level("l2").capacity == CPU_MODELS["sapphirerapids"].l2
    assert target.level("l1").capacity == CPU_MODELS["sapphirerapids"].l1
    assert target.extras["clock_ghz"] == CPU_MODELS["sapphirerapids"].clock_ghz
    assert target.extras["measured"] == 0


def test_a_host_cannot_run_another_machines_code() -> None:
    from dataclasses import replace

    arm = replace(get_target("cpu:x86-64-v2"), arch="aarch64")
    assert host_cannot_run(arm) and "aarch64" in host_cannot_run(arm)[0]
