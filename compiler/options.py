"""Compile options: what a user may ask of a compilation, validated up front."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from compiler.errors import OptionsError


@dataclass(frozen=True)
class CompileOptions:
    """Options of one compilation. Unknown keys are refused by `from_dict`."""

    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    validate: bool = True
    tolerance: float = 1e-4  # relative L2 error allowed against onnxruntime
    top_k: int = 5  # candidates measured per kernel where the device is present
    measure: bool = True  # time top-k candidates on the device when it is present
    seed: int = 0  # validation inputs
    threads: int | None = None  # CPU threads the kernels are scheduled for, measured and validated with
    fuse: bool = True
    split_k: bool = True  # GPU: contractions that leave SMs idle walk their reduction in slices

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> CompileOptions:
        """Build from JSON-like data; every problem is an OptionsError naming the option."""
        if d is None:
            return cls()
        if isinstance(d, CompileOptions):
            return d
        if not isinstance(d, dict):
            raise OptionsError("options must be an object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise OptionsError(f"unknown option {unknown[0]!r}; known options: {', '.join(sorted(known))}")
        kw: dict[str, Any] = {}
        for k, v in d.items():
            kw[k] = _check(k, v)
        return cls(**kw)

    def codegen_key(self) -> dict:
        """The options that change generated code (they are part of every kernel key): a
        thread count schedules a CPU kernel for that many cores."""
        return {"threads": self.threads} if self.threads else {}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _check(name: str, v: Any) -> Any:
    if name == "input_shapes":
        if not isinstance(v, dict):
            raise OptionsError("option 'input_shapes' must map input names to lists of dims")
        out = {}
        for k, dims in v.items():
            if not isinstance(k, str) or not isinstance(dims, list | tuple) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in dims
            ):
                raise OptionsError(f"option 'input_shapes': {str(k)[:80]!r} needs a list of non-negative ints")
            out[k] = [int(x) for x in dims]
        return out
    if name in {"validate", "measure", "fuse", "split_k"}:
        if not isinstance(v, bool):
            raise OptionsError(f"option {name!r} must be true or false")
        return v
    if name == "tolerance":
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
            raise OptionsError("option 'tolerance' must be a number in (0, 1]")
        return float(v)
    if name in {"top_k", "seed"}:
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name == "top_k" else 0):
            raise OptionsError(f"option {name!r} must be a {'positive' if name == 'top_k' else 'non-negative'} integer")
        if name == "top_k" and v > 32:
            raise OptionsError("option 'top_k' must be at most 32")
        return v
    if name == "threads":
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1 or v > 1024):
            raise OptionsError("option 'threads' must be a positive integer or null")
        return v
    raise OptionsError(f"unknown option {name!r}")
