"""Real models for the GPU benchmark, defined in PyTorch (random weights from a fixed seed,
nothing downloaded) and exported to ONNX at bench time, so the same network runs as
PyTorch eager, as `torch.compile` and as a tileforge artifact. Needs torch and
torchvision (the GPU machine has both; tileforge itself does not)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import onnx
import torch


def _resnet18() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import torchvision

    return torchvision.models.resnet18(weights=None), (torch.randn(1, 3, 224, 224),)


def _mobilenet_v2() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import torchvision

    return torchvision.models.mobilenet_v2(weights=None), (torch.randn(1, 3, 224, 224),)


def _bert_encoder() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Two BERT-base encoder layers (hidden 768, 12 heads, FFN 3072, GELU) at sequence 128."""
    layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                             batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (torch.randn(1, 128, 768),)


def _mlp() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A transformer FFN block at batch 32: 1024 -> 4096 -> GELU -> 1024."""
    return (torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)),
            (torch.randn(32, 1024),))


TORCH_MODELS: dict[str, Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]] = {
    "resnet18": _resnet18,
    "mobilenet_v2": _mobilenet_v2,
    "bert_encoder_2x768": _bert_encoder,
    "mlp_1024x4096": _mlp,
}


def build(name: str, seed: int = 0) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The named model in eval mode with weights drawn from `seed`, and example inputs."""
    torch.manual_seed(seed)
    module, inputs = TORCH_MODELS[name]()
    return module.eval(), inputs


def export_onnx(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], opset: int = 17) -> onnx.ModelProto:
    """`module` exported to ONNX (TorchScript exporter where torch still has it, else dynamo)."""
    names = [f"input{i}" for i in range(len(inputs))]
    # The fused "fast path" of nn.TransformerEncoderLayer is one opaque op to the exporter.
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), tempfile.TemporaryDirectory() as d:
            path = Path(d) / "model.onnx"
            try:
                torch.onnx.export(module, inputs, str(path), opset_version=opset, input_names=names,
                                  dynamo=False)
            except Exception:
                program = torch.onnx.export(module, inputs, input_names=names, opset_version=18,
                                            dynamo=True)
                program.save(str(path))
            return onnx.load(str(path))
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
