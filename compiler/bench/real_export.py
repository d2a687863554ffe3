"""Export a registry model to ONNX with one of torch's two exporters, once: the file is cached
under the bench folder (gitignored), keyed by model name, exporter and the versions of torch
and of the library that defines the model, so a new torch or transformers exports afresh.
Needs torch (and the model's library).
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
from pathlib import Path
from typing import Any

import onnx
import torch
from torch.onnx import symbolic_helper

from compiler.bench.real_models import DYNAMO, TORCHSCRIPT, RealModel

CACHE_DIR = Path("build/bench/real")
OPSET = {DYNAMO: 18, TORCHSCRIPT: 17}


@symbolic_helper.parse_args("v", "i", "i", "v", "v")
def _diff_symbolic(g: Any, x: Any, n: int, dim: int, prepend: Any, append: Any) -> Any:
    """aten::diff for the TorchScript exporter, which has none: transformers' mask creation
    takes the differences of the position ids (to find packed sequences) in every causal decoder.
    `n` times: the input (with `prepend` and `append` joined on `dim`) minus itself shifted by one."""
    parts = [p for p in (prepend, x, append) if not symbolic_helper._is_none(p)]
    y = g.op("Concat", *parts, axis_i=dim) if len(parts) > 1 else x
    axes = g.op("Constant", value_t=torch.tensor([dim]))

    def cut(start: int, end: int) -> Any:
        starts, ends = g.op("Constant", value_t=torch.tensor([start])), g.op("Constant", value_t=torch.tensor([end]))
        return g.op("Slice", y, starts, ends, axes)

    for _ in range(n):
        y = g.op("Sub", cut(1, torch.iinfo(torch.int64).max), cut(0, -1))
    return y


@symbolic_helper.parse_args("v", "i", "none")
def _cumsum_symbolic(g: Any, x: Any, dim: int, dtype: Any) -> Any:
    """aten::cumsum for the TorchScript exporter: torch's own, after counting a bool input in
    int64 as torch does (ONNX's CumSum takes no bools; the same mask code sums one)."""
    from torch.onnx._internal.torchscript_exporter import symbolic_opset11

    if x.type().scalarType() == "Bool":
        x = g.op("Cast", x, to_i=onnx.TensorProto.INT64)
    return symbolic_opset11.cumsum(g, x, dim, dtype)


# What the TorchScript exporter lacks or gets wrong, by operator.
_TORCHSCRIPT_SYMBOLICS = {"aten::diff": _diff_symbolic, "aten::cumsum": _cumsum_symbolic}


def export_onnx(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], exporter: str) -> onnx.ModelProto:
    """`module` exported by `exporter` (DYNAMO at opset 18, TORCHSCRIPT at opset 17), inputs
    named input0, input1, ..."""
    if exporter not in OPSET:
        raise ValueError(f"unknown exporter {exporter!r}; known: {', '.join(OPSET)}")
    names = [f"input{i}" for i in range(len(inputs))]
    # The fused "fast path" of nn.TransformerEncoderLayer is one opaque op to the exporters.
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), tempfile.TemporaryDirectory() as d:
            path = Path(d) / "model.onnx"
            if exporter == DYNAMO:
                program = torch.onnx.export(module, inputs, input_names=names, opset_version=OPSET[exporter],
                                            dynamo=True, verbose=False)
                program.save(str(path))
            else:
                for name, symbolic in _TORCHSCRIPT_SYMBOLICS.items():
                    torch.onnx.register_custom_op_symbolic(name, symbolic, OPSET[exporter])
                torch.onnx.export(module, inputs, str(path), input_names=names, opset_version=OPSET[exporter],
                                  dynamo=False)
            return onnx.load(str(path))
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def _library_version(source: str) -> str:
    """The installed version of the library that defines a model ("tileforge" and torch.nn: torch's)."""
    try:
        return importlib.metadata.version(source)
    except importlib.metadata.PackageNotFoundError:
        return torch.__version__


def cache_path(model: RealModel, exporter: str, cache_dir: Path | None = None) -> Path:
    """Where `model` exported by `exporter` is cached (in `cache_dir`, default CACHE_DIR)."""
    key = (f"{model.name}-{exporter}-torch{torch.__version__}-{model.source}{_library_version(model.source)}"
           f"-{model.recipe_digest()}")
    return (cache_dir or CACHE_DIR) / f"{key.replace('/', '_').replace('+', '_')}.onnx"


def exported(model: RealModel, exporter: str, cache_dir: Path | None = None) -> bytes:
    """The serialized ONNX of `model` exported by `exporter`: from the cache, or exported
    (from seed 0) and cached. A failed export raises and caches nothing."""
    path = cache_path(model, exporter, cache_dir)
    if path.exists():
        return path.read_bytes()
    module, inputs = model.build()
    data = export_onnx(module, inputs, exporter).SerializeToString()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)  # atomic: a concurrent bench never reads half a file
    return data
