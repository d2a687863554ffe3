"""Toolchain version strings, read once per process from `<tool> --version`.

The version is part of every target fingerprint (kernels built by one compiler
version are not reused under another), so it is read here, in the target
layer, rather than from compiler.build, which sits above it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

# Where toolchains are looked up: fixed, not the caller's PATH, so the version in the
# fingerprint is that of the program compiler.build runs (build's sandbox uses this path).
# /usr/local/cuda/bin is where NVIDIA's installers put nvcc (with a link from
# /usr/local/bin on some machines, not on others); CUDA_HOME, the variable CUDA tools
# agree on, names another toolkit. Read once, at import: one path for the process.
TOOL_PATH = ":".join(["/usr/local/bin", "/usr/bin", "/bin", "/usr/local/cuda/bin",
                      *([os.path.join(os.environ["CUDA_HOME"], "bin")] if os.environ.get("CUDA_HOME") else [])])


def find_tool(program: str) -> str | None:
    """Where `program` is on TOOL_PATH (the path builds run with), or None."""
    return shutil.which(program, path=TOOL_PATH)


@functools.cache
def version_lines(program: str) -> tuple[str, ...]:
    """The non-empty lines `program --version` prints; () when it is missing or fails.

    Runs without a shell, with a time limit, so a broken toolchain cannot hang
    target detection.
    """
    path = find_tool(program)
    if path is None:
        return ()
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return ()
    if done.returncode != 0:
        return ()
    return tuple(line.strip() for line in done.stdout.splitlines() if line.strip())


def gcc_version() -> str:
    """First line of `gcc --version` (e.g. "gcc (Debian 12.2.0-14) 12.2.0"), or "gcc-unavailable"."""
    lines = version_lines("gcc")
    return lines[0] if lines else "gcc-unavailable"


def nvcc_version() -> str:
    """nvcc's release line (e.g. "nvcc: Cuda compilation tools, release 13.0, V13.0.88"),
    or "nvcc-unavailable"."""
    lines = version_lines("nvcc")
    release = [line for line in lines if "release" in line]
    if release:
        return f"nvcc: {release[0]}"
    return f"nvcc: {lines[-1]}" if lines else "nvcc-unavailable"
