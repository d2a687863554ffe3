"""One backend per target kind (compiler/backends/base.py): `backend_for(target)`."""

from __future__ import annotations

from collections.abc import Callable

from compiler.backends.base import Backend
from compiler.target.base import Target

__all__ = ["Backend", "backend_for"]


def _c() -> Backend:
    from compiler.backends.c import CBackend

    return CBackend()


def _cuda() -> Backend:
    from compiler.backends.cuda import CudaBackend

    return CudaBackend()


# Imported on first use: a CPU compilation loads neither nvcc's wrapper nor pycuda's.
_BACKENDS: dict[str, Callable[[], Backend]] = {"cpu": _c, "cuda": _cuda}


def backend_for(target: Target) -> Backend:
    """The backend of `target`'s kind (its renderer, toolchain, artifact files and runtime)."""
    if target.kind not in _BACKENDS:
        raise ValueError(f"no backend for target kind {target.kind!r}")
    return _BACKENDS[target.kind]()
