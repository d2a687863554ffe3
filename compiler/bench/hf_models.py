"""Real architectures from the model code of `transformers`, at configurations small enough to
export and compile in seconds (fewer layers than the published checkpoints, same blocks).
Each builder returns (module, example inputs); weights are whatever the seeded random
initialisation draws. Needs torch and transformers.
"""

from __future__ import annotations

import torch
import transformers as hf

from compiler.bench.torch_nets import FirstOutput

Built = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]
IMAGE = (1, 3, 224, 224)
SEQ = 128


def _image(model_cls: type, config: hf.PretrainedConfig, shape: tuple[int, ...] = IMAGE) -> Built:
    return FirstOutput(model_cls(config)), (torch.randn(*shape),)


def _tokens(model_cls: type, config: hf.PretrainedConfig, seq: int = SEQ) -> Built:
    return FirstOutput(model_cls(config)), (torch.randint(0, config.vocab_size, (1, seq)),)


def resnet18() -> Built:
    """ResNet-18 (basic blocks 2-2-2-2), 1000-way head."""
    return _image(hf.ResNetForImageClassification, hf.ResNetConfig(
        embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2], layer_type="basic",
        num_labels=1000))


def resnet50() -> Built:
    """ResNet-50 (bottleneck blocks 3-4-6-3, 1x1 convolutions around each 3x3), 1000-way head:
    102 MB of weights, the suite's CNN of issue 17's compile-time size."""
    return _image(hf.ResNetForImageClassification, hf.ResNetConfig(
        embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[3, 4, 6, 3], layer_type="bottleneck",
        num_labels=1000))


def regnet_y_400mf() -> Built:
    """RegNetY-400MF: grouped 3x3 convs (groups of 8 channels) with squeeze-excitation."""
    return _image(hf.RegNetForImageClassification, hf.RegNetConfig(
        embedding_size=32, hidden_sizes=[48, 104, 208, 440], depths=[1, 3, 6, 6], groups_width=8,
        layer_type="y", num_labels=1000))


def efficientnet_b0() -> Built:
    """EfficientNet-B0: inverted residuals, depthwise convs, squeeze-excitation, SiLU.

    Its own initialisation (every conv weight and every batch norm's scale normal with std
    0.02) shrinks the activations to subnormals within a few blocks and to zero by the
    logits: both runtimes then time subnormal arithmetic and the validation compares zeros.
    The convs are drawn He-normal and the batch norms scale by 1 instead, which keeps the
    activations of every block in range."""
    module, inputs = _image(hf.EfficientNetForImageClassification, hf.EfficientNetConfig(
        width_coefficient=1.0, depth_coefficient=1.0, image_size=224, hidden_dim=1280, num_labels=1000))
    for layer in module.modules():
        if isinstance(layer, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
        elif isinstance(layer, torch.nn.BatchNorm2d):
            torch.nn.init.ones_(layer.weight)
    return module, inputs


def mobilenet_v2() -> Built:
    """MobileNetV2 1.0: inverted residuals with depthwise 3x3 convs and ReLU6."""
    return _image(hf.MobileNetV2ForImageClassification, hf.MobileNetV2Config(num_labels=1000))


def mobilenet_v1() -> Built:
    """MobileNetV1 1.0: depthwise-separable convs."""
    return _image(hf.MobileNetV1ForImageClassification, hf.MobileNetV1Config(num_labels=1000))


def convnext() -> Built:
    """ConvNeXt at the tiny widths (96-768) with 2 blocks per stage: depthwise 7x7, LayerNorm, GELU MLP."""
    return _image(hf.ConvNextForImageClassification, hf.ConvNextConfig(
        hidden_sizes=[96, 192, 384, 768], depths=[2, 2, 2, 2], num_labels=1000))


def gpt2() -> Built:
    """GPT-2 small widths (768, 12 heads), 4 layers, sequence 128: causal mask, GELU-tanh."""
    return _tokens(hf.GPT2Model, hf.GPT2Config(n_layer=4, use_cache=False))


def llama() -> Built:
    """Llama, 2 layers of hidden 512, 8 query heads over 2 KV heads (GQA), rotary, RMSNorm, SwiGLU."""
    return _tokens(hf.LlamaModel, hf.LlamaConfig(
        hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=2, vocab_size=8000, max_position_embeddings=512, use_cache=False))


def qwen2() -> Built:
    """Qwen2, 2 layers of hidden 512: GQA (8 over 2) with biased q/k/v projections, rotary, RMSNorm."""
    return _tokens(hf.Qwen2Model, hf.Qwen2Config(
        hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=2, vocab_size=8000, max_position_embeddings=512, use_cache=False))


def mistral() -> Built:
    """Mistral, 2 layers of hidden 512: GQA (8 over 2), rotary, RMSNorm, sliding-window causal mask."""
    return _tokens(hf.MistralModel, hf.MistralConfig(
        hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=2, vocab_size=8000, max_position_embeddings=512, sliding_window=64,
        use_cache=False))


def gemma() -> Built:
    """Gemma, 2 layers of hidden 512: multi-query attention, rotary, RMSNorm (1 + w), GELU-tanh GLU."""
    return _tokens(hf.GemmaModel, hf.GemmaConfig(
        hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=1, head_dim=64, vocab_size=8000, max_position_embeddings=512, use_cache=False))


def bert() -> Built:
    """BERT-base widths (768, 12 heads), 4 layers, sequence 128: a bidirectional encoder."""
    return _tokens(hf.BertModel, hf.BertConfig(num_hidden_layers=4))


def vit() -> Built:
    """ViT-Base/16 widths (768, 12 heads), 4 layers, 224x224."""
    return _image(hf.ViTModel, hf.ViTConfig(num_hidden_layers=4))


def deit_small() -> Built:
    """DeiT-Small widths (384, 6 heads), 6 layers, 224x224, with its distillation token."""
    return _image(hf.DeiTModel, hf.DeiTConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=6,
                                              intermediate_size=1536))


def swin() -> Built:
    """Swin-T widths (96-768) with 2 blocks per stage: shifted-window attention, patch merging."""
    return _image(hf.SwinModel, hf.SwinConfig(depths=[2, 2, 2, 2]))


def segformer() -> Built:
    """SegFormer-B0 encoder at 256x256: overlapping patch embeddings, reduced-key attention, Mix-FFN
    (a depthwise 3x3 conv between its linears)."""
    return _image(hf.SegformerModel, hf.SegformerConfig(), (1, 3, 256, 256))


def whisper_encoder() -> Built:
    """Whisper-tiny's audio encoder: two 1-D convs over 80 log-mel bins x 3000 frames, then
    4 transformer layers (384 wide, 6 heads) over 1500 positions."""
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = hf.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                              num_mel_bins=80, max_source_positions=1500)
    return FirstOutput(WhisperEncoder(config)), (torch.randn(1, 80, 3000),)
