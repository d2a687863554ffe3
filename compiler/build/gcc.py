"""The C toolchain: kernels to object files, objects to one shared library.

Flags come from the target through `c_flags` only, so everything that shapes
the machine code is covered by the target fingerprint (ISA features plus the
gcc version, read once in the target layer and re-exported here).
"""

from __future__ import annotations

import functools
import os
import platform
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from compiler.build.sandbox import run_tool
from compiler.errors import BuildError
from compiler.target.base import Target
from compiler.target.cpu_models import cpu_model
from compiler.target.toolchain import gcc_version

__all__ = ["COMPILE_JOBS", "balanced_batches", "c_flags", "checked_names", "compile_objects", "gcc_version", "has_libmvec",
           "link_shared"]

GCC = "gcc"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_MARCH = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# Not -ffast-math: kernels must keep IEEE NaN / inf semantics (the interpreter's).
BASE_FLAGS = ("-O3", "-fopenmp", "-fno-math-errno", "-fPIC", "-fwrapv", "-std=gnu11")
COMPILE_JOBS = 2
# gcc's tuning for some x86 cores (znver1, sandybridge) splits every 256-bit access it
# cannot prove aligned into two 128-bit halves; kernels' rows and buffers are aligned
# at run time, where whole accesses are faster (a softmax row kernel on Zen: -4%).
X86_TUNING = ("-mno-avx256-split-unaligned-load", "-mno-avx256-split-unaligned-store")


LIBMVEC_FLAG = "-DTF_LIBMVEC"


def c_flags(target: Target | None = None) -> tuple[str, ...]:
    """gcc flags for kernels of `target`: a named CPU model's (`extras["isa"]`), else
    `-march=extras["march"]`, default the build machine's (`native`).

    Where glibc's vector math library exists, kernels call its SIMD exp / erf /
    tanh / ... (`-DTF_LIBMVEC`, and `link_shared` then links it).
    """
    extras = target.extras if target is not None else {}
    if "isa" in extras:
        model = cpu_model(str(extras["isa"]))
        if model is None:
            raise BuildError(f"unknown CPU model {extras['isa']!r} in target")
        isa = model.gcc_flags
    else:
        march = str(extras.get("march", "native"))
        if not _MARCH.fullmatch(march):
            raise BuildError(f"bad -march value {march!r} in target")
        isa = (f"-march={march}",)
    vector_math = (LIBMVEC_FLAG,) if has_libmvec() else ()
    tuning = X86_TUNING if platform.machine() in {"x86_64", "AMD64", "i686"} else ()
    return (*BASE_FLAGS, *isa, *tuning, *vector_math)


@functools.cache
def has_libmvec() -> bool:
    """Whether gcc finds glibc's libmvec (x86-64 glibc only)."""
    found = run_tool([GCC, "-print-file-name=libmvec.so"], {}, ()).stdout.strip()
    return os.path.isabs(found) and os.path.exists(found)


def checked_names(names: Sequence[str], what: str) -> None:
    """BuildError unless every one of `names` (the `what`s) is a plain C identifier."""
    for n in names:
        if not _IDENT.fullmatch(n):
            raise BuildError(f"{what} name {n!r} is not a C identifier")


def _compile_batch(batch: Sequence[tuple[str, str]], flags: Sequence[str]) -> dict[str, bytes]:
    files = {f"k{i}.c": src for i, (_, src) in enumerate(batch)}
    objs = [f"k{i}.o" for i in range(len(batch))]
    run = run_tool([GCC, "-c", *flags, *files], files, objs)
    return {name: run.files[f"k{i}.o"] for i, (name, _) in enumerate(batch)}


def balanced_batches(sources: Mapping[str, str], jobs: int) -> list[list[tuple[str, str]]]:
    """`sources` in `jobs` batches of about equal work: the longest first, each to the batch
    with the fewest bytes so far (gcc's time grows with a source's length: ResNet-50's
    220 KB Winograd transforms take 1.2-1.7 s, its 20 KB kernels 0.1-0.2 s; dealt in turn
    by name, two transforms could share a batch while the other gcc finished early)."""
    batches: list[list[tuple[str, str]]] = [[] for _ in range(jobs)]
    loads = [0] * jobs
    for name, src in sorted(sources.items(), key=lambda item: (-len(item[1]), item[0])):
        lightest = loads.index(min(loads))
        batches[lightest].append((name, src))
        loads[lightest] += len(src)
    return batches


def compile_objects(sources: Mapping[str, str], flags: Sequence[str]) -> dict[str, bytes]:
    """Compile C translation units (symbol -> source) to object files (symbol -> bytes).

    Sources are split into a few batches, each one gcc run, run side by side.
    """
    checked_names(list(sources), "kernel")
    if not sources:
        return {}
    batches = balanced_batches(sources, min(COMPILE_JOBS, len(sources)))
    with ThreadPoolExecutor(len(batches)) as pool:
        parts = list(pool.map(lambda b: _compile_batch(b, flags), batches))
    return {k: v for part in parts for k, v in part.items()}


# The sources compiled at link time are glue (the model's entry point: kernel calls in
# waves between barriers), which -O3 spent most of a warm compile's link on: ResNet-50's
# 47 KB entry.c took 0.72 s at -O3, 0.23 at -O1 (Zen 3). The kernels come as objects.
LINK_SOURCES_OPT = "-O1"


def link_shared(objects: Sequence[bytes], extra_sources: Mapping[str, str],
                flags: Sequence[str]) -> bytes:
    """Link object files and extra C sources (name -> source) into one shared library's bytes."""
    checked_names(list(extra_sources), "source")
    files: dict[str, str | bytes] = {f"o{i}.o": obj for i, obj in enumerate(objects)}
    files.update({f"{name}.c": src for name, src in extra_sources.items()})
    libs = ["-lmvec"] if LIBMVEC_FLAG in flags else []
    argv = [GCC, "-shared", *flags, LINK_SOURCES_OPT, "-o", "lib.so", *files, "-fopenmp", *libs, "-lm"]
    return run_tool(argv, files, ["lib.so"]).files["lib.so"]
