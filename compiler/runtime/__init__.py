"""Loading and running artifacts: `load(path).run({name: array}) -> {name: array}`.

CPU artifacts run in-process through ctypes (runtime/cpu.py); CUDA artifacts
through runtime/cuda.py, imported only when needed, whose
`load_extracted(manifest, folder)` must read all it needs from the verified,
extracted folder before returning (the folder is removed afterwards).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from compiler.errors import ArtifactError
from compiler.runtime.artifact import read_artifact
from compiler.runtime.executable import Executable, TensorSpec

__all__ = ["Executable", "TensorSpec", "load", "load_folder"]


def load(path: str | Path, threads: int | None = None) -> Executable:
    """Verify, extract and load an artifact; `threads` sets the CPU thread count."""
    with tempfile.TemporaryDirectory(prefix="tileforge-load-") as tmp:
        manifest, folder = read_artifact(path, tmp)
        return load_folder(manifest, folder, threads)


def load_folder(manifest: dict[str, Any], folder: Path, threads: int | None = None,
                weights: bytes | memoryview | None = None) -> Executable:
    """Load the artifact files in `folder`, which `manifest` describes: an artifact `load`
    verified and extracted, or one the pipeline validates before it packs it. Reads all
    it needs before returning: the caller may remove the folder.

    `weights`: the bytes of weights.bin where the caller holds them (the pipeline, which
    then does not write them out only to have them read back: 1.1 s of a 209 MB model's
    compile); otherwise weights.bin is read from `folder`."""
    kind = manifest.get("target_kind")
    if kind == "cpu":
        from compiler.runtime.cpu import CpuExecutable

        return CpuExecutable(manifest, folder, weights, threads)  # threads: its weights pack on them too
    if kind == "cuda":
        exe = _load_cuda(manifest, folder, weights)
        if threads is not None:
            exe.set_threads(threads)
        return exe
    raise ArtifactError(f"artifact targets unknown device kind {kind!r}")


def _load_cuda(manifest: dict[str, Any], folder: Path, weights: bytes | memoryview | None) -> Executable:
    try:
        from compiler.runtime import cuda
    except ImportError as e:
        raise ArtifactError(
            f"this artifact is for a CUDA GPU; running it needs pycuda and an NVIDIA GPU ({e})"
        ) from e
    return cuda.load_extracted(manifest, folder, weights)
