"""tileforge as an `onnx.backend.base.Backend`, so onnx's node test suite can run against it.

Each prepared model is compiled into an artifact and run from it, exactly as a
user's model would be: for device "CPU" for this host's CPU target, for device
"CUDA" for this machine's GPU (its `cuda:` preset), which is supported where a
GPU, pycuda and nvcc are present. Validation against onnxruntime
is off here (the suite's expected outputs are the reference), and so is the
timing of tile candidates (the suite checks numbers, not speed). Inputs that decide
shapes (Reshape's shape, a Reduce's axes...) are specialized: the model is
compiled on first use with them frozen, once per distinct set of their values.
"""

from __future__ import annotations

import functools
import tempfile
import unittest
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from compiler.cache import KernelCache, MemoryKernelCache
from compiler.frontend import SUPPORTED_OPS
from compiler.frontend.dtypes import IR_ELEMENT_TYPES
from compiler.frontend.loader import all_nodes
from compiler.frontend.registry import DataDependentShapeError
from compiler.frontend.specialize import element_types, specialize
from compiler.runtime.executable import Executable
from compiler.target.toolchain import find_tool

_CACHE: KernelCache = MemoryKernelCache()


class TileforgeRep(BackendRep):
    """A model compiled for tileforge; `run` takes inputs positionally, as onnx's runner passes them."""

    def __init__(self, model: onnx.ModelProto, target: str) -> None:
        self._model, self._target = model, target
        self._dir = tempfile.TemporaryDirectory(prefix="tileforge-backend-")
        initializers = {i.name for i in model.graph.initializer}
        self._inputs = [i.name for i in model.graph.input if i.name not in initializers]
        self._outputs = [o.name for o in model.graph.output]
        # frozen input values (as a hashable key) -> (executable, names of the frozen inputs)
        self._compiled: dict[tuple, tuple[Executable, frozenset[str]]] = {}
        self._frozen_names: frozenset[str] | None = None
        try:
            self._compiled[()] = (self._compile(model), frozenset())
            self._frozen_names = frozenset()
        except DataDependentShapeError:
            pass  # compiled on first run, with shape inputs frozen

    def _compile(self, model: onnx.ModelProto) -> Executable:
        from compiler.pipeline import compile_model
        from compiler.runtime import load

        out = Path(self._dir.name) / f"model{len(self._compiled)}.tar.gz"
        compile_model(model, self._target, {"validate": False, "measure": False}, cache=_CACHE,
                      output=out)
        return load(out)

    @staticmethod
    def _values_key(feeds: dict[str, np.ndarray], names: frozenset[str]) -> tuple:
        return tuple((n, feeds[n].dtype.str, feeds[n].shape, feeds[n].tobytes()) for n in sorted(names))

    def _executable(self, feeds: dict[str, np.ndarray]) -> tuple[Executable, frozenset[str]]:
        if self._frozen_names is not None:
            key = self._values_key(feeds, self._frozen_names)
            if key in self._compiled:
                return self._compiled[key]
        exe, frozen = specialize(self._model, feeds, self._compile)
        self._frozen_names = frozenset(frozen)
        key = self._values_key(feeds, self._frozen_names)
        self._compiled[key] = (exe, self._frozen_names)
        return self._compiled[key]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            feeds = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            seq = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = {n: np.asarray(v) for n, v in zip(self._inputs, seq, strict=False)}
        exe, frozen = self._executable(feeds)
        outs = exe.run({n: v for n, v in feeds.items() if n not in frozen})
        return tuple(outs[n] for n in self._outputs)


@functools.cache
def _gpu_target() -> str | None:
    """This machine's `cuda:` target when it can build and run CUDA artifacts, else None."""
    if find_tool("nvcc") is None:
        return None
    from compiler.errors import ArtifactError
    from compiler.runtime.cuda import device_target

    try:
        return device_target()
    except ArtifactError:
        return None


def _target_for(device: str) -> str:
    if device.upper().startswith("CUDA"):
        target = _gpu_target()
        if target is None:
            raise unittest.SkipTest("device CUDA needs a GPU, pycuda and nvcc")
        return target
    return TileforgeBackend.target


class TileforgeBackend(Backend):
    """tileforge behind onnx's backend interface: device "CPU" (this host) or "CUDA"."""

    target = "cpu"

    @classmethod
    def unsupported(cls, model: onnx.ModelProto) -> list[str]:
        """What of `model` tileforge does not handle: op types and element types (sorted)."""
        g = model.graph
        ops = {f"op {n.op_type}" for n in all_nodes(g.node)
               if n.op_type not in SUPPORTED_OPS or n.domain not in ("", "ai.onnx")}
        types = {f"element type {onnx.TensorProto.DataType.Name(t)}"
                 for t in element_types(model) - IR_ELEMENT_TYPES}
        values = {f"{v.type.WhichOneof('value')} value {v.name!r}"
                  for v in (*g.input, *g.output) if not v.type.HasField("tensor_type")}
        return sorted(ops | types | values)

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return not cls.unsupported(model)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> TileforgeRep:
        """Compile `model`; a model using what tileforge does not support is skipped, naming it."""
        super().prepare(model, device, **kwargs)
        missing = cls.unsupported(model)
        if missing:
            raise unittest.SkipTest(f"not supported by tileforge: {', '.join(missing)}")
        return TileforgeRep(model, _target_for(device))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, Any]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        raise NotImplementedError("tileforge compiles whole models; use prepare/run_model")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU") or (device.upper().startswith("CUDA")
                                                    and _gpu_target() is not None)


prepare = TileforgeBackend.prepare
run_model = TileforgeBackend.run_model
supports_device = TileforgeBackend.supports_device
