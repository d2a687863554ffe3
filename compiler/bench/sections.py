"""BENCHMARKS.md's sections: the machine they were measured on, and a section rerun alone
(`--section`) spliced in place."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def splice(text: str, lines: list[str]) -> str:
    """`text` (BENCHMARKS.md) with the section whose heading (its first "## " line) `lines`
    holds replaced by `lines` (or inserted before the GPU section, or appended, where `text`
    has no such section)."""
    heading = next(x for x in lines if x.startswith("## "))
    old = text.rstrip("\n").split("\n")
    if heading not in old:
        gpu = next((i for i, x in enumerate(old) if x.startswith("## GPU")), len(old))
        start = end = gpu - 1 if gpu < len(old) else len(old)
    else:
        start = old.index(heading)
        end = next((i for i, x in enumerate(old) if i > start and x.startswith("## ")), len(old))
        while end - 1 > start and not old[end - 1].strip():  # the blank lines before the next heading stay
            end -= 1
        lead = lines.index(heading)  # the blank lines `lines` puts before its heading replace those there
        while lead and start and not old[start - 1].strip():
            start, lead = start - 1, lead - 1
    tail = old[end:]
    if tail and tail[0].startswith("## ") and lines[-1].strip():  # a next section that starts at its heading
        tail = ["", *tail]
    return "\n".join(old[:start] + lines + tail) + "\n"


def write_section(out: Path, lines: list[str]) -> None:
    """Splice the section into the markdown file `out`."""
    out.write_text(splice(out.read_text() if out.exists() else "# Benchmarks\n", lines))


def machine_description() -> str:
    """This machine for a benchmark heading: CPU model, SIMD, logical CPUs, Python, load."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from compiler.target.cpu import detect_cpu

    isa = detect_cpu().extras.get("simd_isa", "unknown SIMD")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{cpu} ({isa}), {os.cpu_count()} logical CPUs, Python {platform.python_version()}; "
            f"load average {load} when it started")
