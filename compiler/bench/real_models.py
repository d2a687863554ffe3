"""The registry of real architectures that `make bench` (and the GPU check) export from PyTorch
at bench time: random weights from a fixed seed, nothing downloaded, nothing committed.

Importing this module needs neither torch nor transformers: each entry names its builder
as "module:function" and only `RealModel.build()` imports it. Run as a module it benchmarks
a subset, for development:

    python -m compiler.bench.real_models [--only NAME[,NAME]] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import sys
from dataclasses import dataclass
from typing import Any

CNN, LLM, VIT, OTHER = "CNN", "transformer/LLM", "vision transformer", "other"
FAMILIES = (CNN, LLM, VIT, OTHER)
DYNAMO, TORCHSCRIPT = "dynamo", "torchscript"
REAL, GPU = "real", "gpu"  # the suites: `make bench`'s real-model section, the GPU check

# What the suite must cover (issue 17); the fast test checks the registry against it.
REQUIRED_FEATURES = frozenset({
    "grouped conv", "depthwise conv", "dilated conv", "SE block", "inverted residual", "channel shuffle",
    "transformer encoder", "transformer decoder", "causal mask", "GQA", "rotary embeddings", "RMSNorm",
    "vision transformer", "UNet", "YOLO-style detector", "LSTM", "Whisper-style encoder",
})


@dataclass(frozen=True)
class RealModel:
    """One architecture: where its definition comes from, what it exercises, how to build it."""

    name: str
    family: str
    source: str  # the library whose model code defines it, or "tileforge" for our own nn.Modules
    builder: str  # "module:function" returning (module, example inputs)
    features: tuple[str, ...] = ()
    exporters: tuple[str, ...] = (DYNAMO,)
    suites: tuple[str, ...] = (REAL,)

    def recipe_digest(self) -> str:
        """A short hash of the builder function's source: a changed recipe (configuration,
        initialisation) is exported again, not read from an older cached export."""
        module_name, fn = self.builder.split(":")
        source = inspect.getsource(getattr(importlib.import_module(module_name), fn))
        return hashlib.sha256(source.encode()).hexdigest()[:8]

    def build(self, seed: int = 0) -> tuple[Any, tuple[Any, ...]]:
        """The module in eval mode with weights drawn from `seed`, and its example inputs."""
        import torch

        module_name, fn = self.builder.split(":")
        make = getattr(importlib.import_module(module_name), fn)
        torch.manual_seed(seed)
        module, inputs = make()
        return module.eval(), inputs


def _hf(name: str, family: str, features: tuple[str, ...], exporters: tuple[str, ...] = (DYNAMO,)) -> RealModel:
    return RealModel(name, family, "transformers", f"compiler.bench.hf_models:{name}", features, exporters)


def _own(name: str, family: str, features: tuple[str, ...], exporters: tuple[str, ...] = (DYNAMO,),
         source: str = "tileforge", suites: tuple[str, ...] = (REAL,)) -> RealModel:
    return RealModel(name, family, source, f"compiler.bench.torch_nets:{name}", features, exporters, suites)


BOTH = (DYNAMO, TORCHSCRIPT)
_ENTRIES = [
    _hf("resnet18", CNN, ("residual",), BOTH),
    _hf("resnet50", CNN, ("residual", "bottleneck")),
    _hf("regnet_y_400mf", CNN, ("grouped conv", "SE block")),
    _hf("efficientnet_b0", CNN, ("depthwise conv", "SE block", "inverted residual", "SiLU")),
    _hf("mobilenet_v2", CNN, ("depthwise conv", "inverted residual")),
    _hf("mobilenet_v1", CNN, ("depthwise conv",)),
    _hf("convnext", CNN, ("depthwise conv", "LayerNorm", "GELU")),
    _own("resnext", CNN, ("grouped conv",)),
    _own("shufflenet_v2", CNN, ("channel shuffle", "depthwise conv"), BOTH),
    _own("dilated_segmenter", CNN, ("dilated conv",)),
    _hf("gpt2", LLM, ("transformer decoder", "causal mask", "GELU-tanh"), BOTH),
    _hf("llama", LLM, ("transformer decoder", "causal mask", "GQA", "rotary embeddings", "RMSNorm", "SwiGLU"),
        BOTH),
    _hf("qwen2", LLM, ("transformer decoder", "causal mask", "GQA", "rotary embeddings", "RMSNorm")),
    _hf("mistral", LLM, ("transformer decoder", "causal mask", "GQA", "rotary embeddings", "RMSNorm",
                         "sliding window")),
    _hf("gemma", LLM, ("transformer decoder", "causal mask", "GQA", "rotary embeddings", "RMSNorm")),
    _hf("bert", LLM, ("transformer encoder",)),
    _own("bert_encoder", LLM, ("transformer encoder",), source="torch.nn", suites=(REAL, GPU)),
    _own("mlp", LLM, ("GELU",), source="torch.nn", suites=(REAL, GPU)),
    _hf("vit", VIT, ("vision transformer", "transformer encoder"), BOTH),
    _hf("deit_small", VIT, ("vision transformer", "transformer encoder")),
    _hf("swin", VIT, ("vision transformer", "shifted windows")),
    _hf("segformer", VIT, ("vision transformer", "depthwise conv")),
    _own("unet", OTHER, ("UNet", "ConvTranspose"), BOTH),
    _own("yolo", OTHER, ("YOLO-style detector", "SiLU", "upsample"), BOTH),
    _own("lstm", OTHER, ("LSTM",), BOTH, source="torch.nn"),
    _own("gru", OTHER, ("GRU",), source="torch.nn"),
    _hf("whisper_encoder", OTHER, ("Whisper-style encoder", "transformer encoder", "conv1d")),
    _own("resnet18_torchvision", CNN, ("residual",), (TORCHSCRIPT, DYNAMO), "torchvision", (GPU,)),
    _own("mobilenet_v2_torchvision", CNN, ("inverted residual",), (TORCHSCRIPT, DYNAMO), "torchvision", (GPU,)),
]
MODELS: dict[str, RealModel] = {m.name: m for m in _ENTRIES}


def suite(name: str) -> list[RealModel]:
    """The registry's models in suite `name` (REAL or GPU), in registry order."""
    return [m for m in MODELS.values() if name in m.suites]


def main(argv: list[str] | None = None) -> int:
    """Benchmark some of the real-model suite and print its markdown section."""
    from compiler.bench.real_suite import run_suite, section

    p = argparse.ArgumentParser(description="Benchmark real architectures exported from PyTorch.")
    p.add_argument("--only", default="", help="comma-separated model names (default: the whole suite)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    a = p.parse_args(argv)
    names = [n for n in a.only.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    models = [MODELS[n] for n in names] if names else suite(REAL)
    print("\n".join(section(run_suite(models, [int(t) for t in a.threads.split(",")]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
