"""What every loaded artifact offers, whatever the device: specs, input checks, aligned memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from compiler.aligned import aligned_empty
from compiler.errors import ArtifactError
from compiler.ir.dtypes import dtype, known_dtypes


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output: its user-facing name, shape and dtype (an IR / numpy name)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @cached_property  # asked for on every run, for every output
    def np_dtype(self) -> np.dtype:
        return np.dtype(dtype(self.dtype).np_type)


class Executable(Protocol):
    """A loaded artifact: `run({name: array}) -> {name: array}` in the model's I/O order."""

    @property
    def input_specs(self) -> list[TensorSpec]: ...

    @property
    def output_specs(self) -> list[TensorSpec]: ...

    def set_threads(self, n: int) -> None: ...

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]: ...


class LoadedArtifact:
    """What the CPU and GPU executables share: their I/O specs and the thread-count check."""

    _inputs: list[TensorSpec]
    _outputs: list[TensorSpec]

    @property
    def input_specs(self) -> list[TensorSpec]:
        return list(self._inputs)

    @property
    def output_specs(self) -> list[TensorSpec]:
        return list(self._outputs)

    @staticmethod
    def check_thread_count(n: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"thread count must be a positive integer, got {n!r}")


def specs_from_manifest(manifest: Mapping[str, Any], which: str) -> list[TensorSpec]:
    """The `inputs` or `outputs` of a manifest as specs; malformed entries raise ArtifactError."""
    try:
        specs = [TensorSpec(str(e["name"]), tuple(int(s) for s in e["shape"]), str(e["dtype"]))
                 for e in manifest[which]]
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"artifact manifest has malformed {which}: {e}") from e
    for s in specs:
        if s.dtype not in known_dtypes() or any(d < 0 for d in s.shape):
            raise ArtifactError(f"artifact manifest has a bad {which} entry {s}")
    if len({s.name for s in specs}) != len(specs):
        raise ArtifactError(f"artifact manifest repeats a name in its {which}")
    return specs


def check_inputs(specs: Sequence[TensorSpec], inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """The inputs in spec order as aligned, contiguous arrays; wrong names, shapes or dtypes raise.

    Arrays are used in place when they already are C-contiguous and naturally aligned
    for their dtype, copied otherwise. Dtypes are never converted silently.
    """
    if len(inputs) != len(specs):
        _wrong_names(specs, inputs)
    arrays = []
    for s in specs:
        if s.name not in inputs:
            _wrong_names(specs, inputs)
        a = np.asarray(inputs[s.name])
        if a.dtype != s.np_dtype:
            raise ArtifactError(f"input {s.name!r} must be {s.dtype}, got {a.dtype}")
        if a.shape != s.shape:
            raise ArtifactError(f"input {s.name!r} must have shape {list(s.shape)}, got {list(a.shape)}")
        if not a.flags.c_contiguous or not a.flags.aligned:
            a = copy_aligned(a)
        arrays.append(a)
    return arrays


def _wrong_names(specs: Sequence[TensorSpec], inputs: Mapping[str, Any]) -> None:
    names = [s.name for s in specs]
    missing = [n for n in names if n not in inputs]
    unexpected = [n for n in inputs if n not in names]
    raise ArtifactError(f"model inputs are {names}; missing {missing}, unexpected {unexpected}")


def copy_aligned(a: np.ndarray) -> np.ndarray:
    """A C-contiguous, aligned copy of `a`."""
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out
