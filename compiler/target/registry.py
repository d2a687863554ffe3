"""Target lookup by name: `cpu`, the CUDA presets and their arch aliases, or a file."""

from __future__ import annotations

from compiler.errors import TargetError
from compiler.target.base import Target
from compiler.target.cpu import detect_cpu, named_cpu_target
from compiler.target.cpu_models import CPU_MODELS
from compiler.target.cuda import CANONICAL_BY_ARCH, cuda_presets, cuda_target
from compiler.target.custom import is_target_file, load_target_file


def list_targets() -> list[str]:
    """The canonical names of every built-in target: "cpu" (this host) first, the named
    CPU models, then the CUDA presets."""
    return ["cpu", *(f"cpu:{name}" for name in CPU_MODELS), *cuda_presets()]


def target_aliases() -> dict[str, str]:
    """Accepted alternative names -> the canonical target they stand for."""
    return {f"cuda:{arch}": f"cuda:{key}" for arch, key in CANONICAL_BY_ARCH.items()}


def get_target(name: str, *, allow_files: bool = False) -> Target:
    """The target called `name`: "cpu" (this machine), "cpu:x86-64-v3" (a named CPU
    model), "cuda:h100", "cuda:sm_90", or, with
    `allow_files`, a path to a .json / .yaml target file. TargetError names unknown targets.

    Files are opt-in because names arrive from users of the service: reading any
    server-side path they name (and echoing what is wrong with it) would leak the
    server's files. Local callers (the CLI) pass `allow_files=True`.
    """
    if not isinstance(name, str) or not name.strip():
        raise TargetError(f"a target name is required; known targets: {', '.join(list_targets())}")
    key = name.strip()
    if is_target_file(key):
        if not allow_files:
            raise TargetError(f"target {name!r} is a file; target files are read only for local "
                              f"use; known targets: {', '.join(list_targets())}")
        return load_target_file(key)
    if key.lower() == "cpu":
        return detect_cpu()
    named = named_cpu_target(key)
    if named is not None:
        return named
    if key.lower().startswith("cuda:"):
        target = cuda_target(key)
        if target is not None:
            return target
    raise TargetError(f"unknown target {name!r}; known targets: {', '.join(list_targets())} "
                      f"(or arch aliases {', '.join(target_aliases())}, or a .json/.yaml file)")
