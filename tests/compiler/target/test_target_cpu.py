"""The cpu target read from this machine."""

import os
from pathlib import Path

from compiler.target import detect_cpu, get_target
from compiler.target.cpu import CpuFacts, cpu_target, isa_features, simd_isa


def test_cpu_target_describes_this_machine():
    t = get_target("cpu")
    assert t.kind == "cpu" and t.name == "cpu"
    assert t.units == len(os.sched_getaffinity(0))
    names = [lv.name for lv in t.levels]
    assert names[0] == "dram" and names[-2:] == ["l2", "l1"]
    assert t.level("l1").capacity < t.level("l2").capacity
    assert all(lv.transaction > 0 and lv.bandwidth > 0 for lv in t.levels)
    assert t.lanes in {1, 4, 8, 16} and t.registers in {16, 32}
    assert t.peak_flops["float32"] > 0 and t.toolchain


def test_l1_size_matches_sysfs_when_present():
    index0 = Path("/sys/devices/system/cpu/cpu0/cache/index0")
    if not index0.exists():
        return
    t = detect_cpu()
    sizes = {p.joinpath("size").read_text().strip() for p in index0.parent.glob("index*")
             if p.joinpath("type").read_text().strip() == "Data"}
    assert f"{t.level('l1').capacity // 1024}K" in sizes


def test_widest_isa_sets_lanes_and_registers():
    assert simd_isa(("avx", "avx2", "avx512f", "fma")) == ("avx512f", 16, 32)
    assert simd_isa(("avx", "avx2", "fma")) == ("avx2", 8, 16)
    assert simd_isa(isa_features("aarch64", {"fp", "asimd"})) == ("neon", 4, 32)
    assert simd_isa(()) == ("scalar", 1, 16)


def test_fingerprint_follows_isa_and_toolchain():
    facts = CpuFacts("x86_64", "Some CPU", 4, 3.0, {1: 32768, 2: 1 << 20, 3: 1 << 25}, 64,
                     ("avx", "avx2", "fma"), 1 << 34)
    a = cpu_target(facts, None, "gcc 12")
    assert a.fingerprint() == cpu_target(facts, None, "gcc 12").fingerprint()
    assert a.fingerprint() != cpu_target(facts, None, "gcc 13").fingerprint()
    wider = CpuFacts(**{**facts.__dict__, "features": ("avx", "avx2", "avx512f", "fma")})
    assert a.fingerprint() != cpu_target(wider, None, "gcc 12").fingerprint()
    # 4 cores x 3 GHz x 8 lanes x FMA (2) x 2 pipes
    assert a.peak_flops["float32"] == 4 * 3e9 * 8 * 2 * 2
    assert [lv.name for lv in a.levels] == ["dram", "l3", "l2", "l1"]
    assert a.level("l3").shared and not a.level("l1").shared


def test_a_thread_count_limits_the_cpu_to_that_many_cores():
    """with_units(n): peak and per-core level bandwidths scale by n / cores; L3 and DRAM,
    shared, stay whole; n at or above the core count changes nothing."""
    facts = CpuFacts("x86_64", "Some CPU", 4, 3.0, {1: 32768, 2: 1 << 20, 3: 1 << 25}, 64,
                     ("avx", "avx2", "fma"), 1 << 34)
    t = cpu_target(facts, None, "gcc 12")
    one = t.with_units(1)
    assert one.units == 1 and one.peak_flops["float32"] == t.peak_flops["float32"] / 4
    for name, scale in (("l1", 0.25), ("l2", 0.25), ("l3", 1.0), ("dram", 1.0)):
        assert one.level(name).bandwidth == t.level(name).bandwidth * scale
        assert one.level(name).capacity == t.level(name).capacity
    assert one.fingerprint() == t.fingerprint()  # the same machine code runs on it
    assert t.with_units(4) is t and t.with_units(8) is t
