"""tileforge as an `onnx.backend.base.Backend`, so onnx's node test suite can run against it.

Each prepared model is compiled for the CPU target into an artifact and run
from it, exactly as a user's model would be. Validation against onnxruntime
is off here: the suite's expected outputs are the reference.
"""

from __future__ import annotations

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

_CACHE: KernelCache = MemoryKernelCache()


class TileforgeRep(BackendRep):
    """A compiled model; `run` takes inputs positionally, as onnx's runner passes them."""

    def __init__(self, model: onnx.ModelProto, target: str) -> None:
        from compiler.pipeline import compile_model
        from compiler.runtime import load

        self._dir = tempfile.TemporaryDirectory(prefix="tileforge-backend-")
        out = Path(self._dir.name) / "model.tar.gz"
        compile_model(model, target, {"validate": False}, cache=_CACHE, output=out)
        self._exe = load(out)
        initializers = {i.name for i in model.graph.initializer}
        self._inputs = [i.name for i in model.graph.input if i.name not in initializers]
        self._outputs = [o.name for o in model.graph.output]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            seq = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = dict(zip(self._inputs, seq, strict=False))
        outs = self._exe.run(feeds)
        return tuple(outs[n] for n in self._outputs)


class TileforgeBackend(Backend):
    """The CPU target behind onnx's backend interface."""

    target = "cpu"

    @classmethod
    def unsupported_ops(cls, model: onnx.ModelProto) -> list[str]:
        """Op types of `model` that tileforge does not lower (sorted, unique)."""
        return sorted({n.op_type for n in model.graph.node
                       if n.op_type not in SUPPORTED_OPS or n.domain not in ("", "ai.onnx")})

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return not cls.unsupported_ops(model)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> TileforgeRep:
        """Compile `model`; a model with ops outside the supported set is skipped, naming them."""
        super().prepare(model, device, **kwargs)
        missing = cls.unsupported_ops(model)
        if missing:
            raise unittest.SkipTest(f"op not supported by tileforge: {', '.join(missing)}")
        return TileforgeRep(model, cls.target)

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
        return device.upper().startswith("CPU")


prepare = TileforgeBackend.prepare
run_model = TileforgeBackend.run_model
supports_device = TileforgeBackend.supports_device
