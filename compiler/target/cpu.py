"""The "cpu" target: this machine's cores, caches and SIMD ISA.

Hardware facts come from the kernel (sched_getaffinity, /sys cache topology,
/proc/cpuinfo flags); bandwidths and peak FLOP/s are derived from the clock
and the ISA unless `tileforge targets --measure` stored real measurements,
which then take precedence.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path

from compiler.target.base import MemoryLevel, Target
from compiler.target.cpu_models import CPU_MODELS, CpuModel, model_of_target
from compiler.target.measure import load_cpu_measurements
from compiler.target.toolchain import gcc_version

# ISA flags that change what code gcc may emit, in /proc/cpuinfo spelling: every
# feature a named CPU model requires, so a host's list says which models it runs.
_X86_FEATURES = tuple(sorted({f for m in CPU_MODELS.values() for f in m.features}))
_ARM_FEATURES = {"asimd": "neon", "neon": "neon", "fphp": "fphp", "asimdhp": "asimdhp",
                 "sve": "sve", "sve2": "sve2", "bf16": "bf16"}

_CACHE_ROOT = Path("/sys/devices/system/cpu/cpu0/cache")
_DEFAULT_CACHE = {1: 32 * 1024, 2: 1024 * 1024, 3: 8 * 1024 * 1024}


@dataclass(frozen=True)
class CpuFacts:
    """What the kernel tells us about this CPU (no derived numbers)."""

    machine: str
    model: str
    cores: int
    clock_ghz: float
    caches: dict[int, int]  # level -> bytes (data or unified caches)
    line: int
    features: tuple[str, ...]
    memory: int


def _parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", text, re.IGNORECASE)
    if m is None:
        raise ValueError(f"bad cache size {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(m.group(1)) * scale


def _read_caches(root: Path) -> tuple[dict[int, int], int]:
    """Data/unified cache sizes per level and the cache line, from sysfs (defaults if absent)."""
    caches: dict[int, int] = {}
    line = 64
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text())
            line = int((index / "coherency_line_size").read_text() or line)
        except (OSError, ValueError):
            continue
        if kind in {"Data", "Unified"}:
            caches[level] = size
    return (caches or dict(_DEFAULT_CACHE)), line


def _read_cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str, float, set[str]]:
    """Model name, clock (GHz) and the raw flag set of the first processor."""
    model, mhz, flags = "", 0.0, set()
    try:
        text = path.read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in {"model name", "cpu model", "hardware"} and not model:
            model = value.strip()
        elif key == "cpu mhz" and not mhz:
            mhz = float(value or 0)
        elif key in {"flags", "features"} and not flags:
            flags = set(value.split())
    return model or platform.processor() or "unknown", (mhz / 1000 if mhz else 2.5), flags


def isa_features(machine: str, flags: set[str]) -> tuple[str, ...]:
    """The ISA features that matter for code generation, sorted, in our spelling."""
    found = {f for f in _X86_FEATURES if f in flags}
    found |= {ours for theirs, ours in _ARM_FEATURES.items() if theirs in flags}
    if machine in {"aarch64", "arm64"}:
        found.add("neon")  # mandatory in AArch64
    return tuple(sorted(found))


def simd_isa(features: tuple[str, ...]) -> tuple[str, int, int]:
    """(widest SIMD ISA, fp32 lanes, vector register count)."""
    if "avx512f" in features:
        return "avx512f", 16, 32
    if "avx2" in features:
        return "avx2", 8, 16
    if "avx" in features:
        return "avx", 8, 16
    if "neon" in features:
        return "neon", 4, 32
    if "sse2" in features:
        return "sse2", 4, 16
    return "scalar", 1, 16


@functools.cache
def read_cpu_facts() -> CpuFacts:
    """This machine's CPU facts (read once per process)."""
    machine = platform.machine() or "unknown"
    model, ghz, flags = _read_cpuinfo()
    caches, line = _read_caches(_CACHE_ROOT)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 8 << 30
    return CpuFacts(machine=machine, model=model, cores=len(os.sched_getaffinity(0)),
                    clock_ghz=ghz, caches=caches, line=line,
                    features=isa_features(machine, flags), memory=memory)


def cpu_target(facts: CpuFacts, measured: dict | None, toolchain: str) -> Target:
    """Build the CPU Target from facts, optional measurements and the gcc version.

    Default bandwidths are bytes per cycle per core typical of current x86 and
    Arm server cores (L1: two vector loads, L2: 32-64 B, L3: 16 B), summed
    over the cores; DRAM assumes ~8 GB/s per core, between 10 and 200 GB/s.
    """
    isa, lanes, vregs = simd_isa(facts.features)
    cores, hz = facts.cores, facts.clock_ghz * 1e9
    vector_bytes = lanes * 4
    fma_pipes = 2 if ("fma" in facts.features or isa in {"avx512f", "neon"}) else 1
    peak32 = cores * hz * lanes * 2 * fma_pipes
    dram_bw = min(max(cores * 8e9, 10e9), 200e9)
    if measured is not None:
        dram_bw = float(measured["dram_bandwidth"])
        peak32 = float(measured["flops_all_threads"])
    l1 = facts.caches.get(1, _DEFAULT_CACHE[1])
    l2 = facts.caches.get(2, _DEFAULT_CACHE[2])
    line = facts.line
    levels = [MemoryLevel("dram", facts.memory, dram_bw, line, shared=True)]
    if 3 in facts.caches:
        levels.append(MemoryLevel("l3", facts.caches[3], cores * hz * 16, line, shared=True))
    levels += [
        MemoryLevel("l2", l2, cores * hz * max(32, vector_bytes), line),
        MemoryLevel("l1", l1, cores * hz * 2 * vector_bytes, line),
    ]
    extras: dict[str, int | float | str] = {
        "cores": cores, "clock_ghz": facts.clock_ghz, "simd_isa": isa,
        "vector_bytes": vector_bytes, "fma_pipes": fma_pipes, "cpu_model": facts.model,
        "measured": int(measured is not None),
    }
    if measured is not None:
        extras["flops_per_core"] = float(measured["flops_1thread"])
    return Target(
        name="cpu", kind="cpu", arch=facts.machine, levels=tuple(levels), units=cores,
        lanes=lanes, banks=1, registers=vregs,
        peak_flops={"float32": peak32, "float64": peak32 / 2, "int32": peak32 / 2},
        features=facts.features, toolchain=toolchain, extras=extras,
    )


def model_target(model: CpuModel, facts: CpuFacts, toolchain: str) -> Target:
    """The Target of a named CPU model: its ISA and caches, this host's core count (the
    threads a compile job schedules for), and no measurements of this host."""
    modelled = replace(facts, machine=model.machine, model=model.description, clock_ghz=model.clock_ghz,
                       caches={1: model.l1, 2: model.l2, 3: model.l3}, line=64,
                       features=tuple(sorted(model.features)))
    target = cpu_target(modelled, None, toolchain)
    return replace(target, name=f"cpu:{model.name}", extras={**target.extras, "isa": model.name})


def named_cpu_target(name: str) -> Target | None:
    """`cpu:x86-64-v3`, `cpu:sapphirerapids`, ... as a Target, or None for other names."""
    model = model_of_target(name)
    return model_target(model, read_cpu_facts(), gcc_version()) if model else None


def host_lacks(machine: str, features: Collection[str], host: CpuFacts | None = None) -> list[str]:
    """What code built for `machine` with ISA `features` needs that this host (or `host`)
    lacks, sorted: empty when it runs here."""
    host = host or read_cpu_facts()
    if machine != host.machine:
        return [f"the instructions of {machine} processors (this host is {host.machine})"]
    return sorted(set(features) - set(host.features))


def host_cannot_run(target: Target) -> list[str]:
    """Why code built for CPU `target` cannot run on this host (empty when it can)."""
    return host_lacks(target.arch, target.features)


def host_description() -> str:
    """This host in a few words, for reports: its name, CPU model and widest SIMD."""
    facts = read_cpu_facts()
    return f"{platform.node() or 'unnamed host'}: {facts.model}, {facts.machine}, {simd_isa(facts.features)[0]}"


def detect_cpu(directory: Path | None = None) -> Target:
    """This machine's CPU as a Target; stored measurements (see `measure_cpu`, read from
    `directory`, default `$TILEFORGE_HOME/targets`) win over the derived defaults."""
    facts = read_cpu_facts()
    measured = load_cpu_measurements(facts.model, facts.cores, directory)
    return cpu_target(facts, measured, gcc_version())
