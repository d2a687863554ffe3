"""Architectures the benchmark needs that no library installable here defines (torchvision
and timm need a CUDA build of torch beside them): written for tileforge from the papers'
descriptions, small enough to export and compile in seconds. Needs torch.
"""

from __future__ import annotations

import torch
from torch import nn


def conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, dilation: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    """Conv (same padding) + BatchNorm + an optional activation: the unit every CNN here stacks."""
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, dilation * (k // 2), dilation, groups, bias=False),
                               nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """ShuffleNet's shuffle: (N, g*c, H, W) -> view (N, g, c, H, W) -> swap g and c -> flatten."""
    n, ch, h, w = x.shape
    return x.view(n, groups, ch // groups, h, w).transpose(1, 2).reshape(n, ch, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNet v2 unit: split channels, depthwise-separable branch on one half, concat, shuffle;
    a stride-2 unit runs both halves through a branch and doubles the channels."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride == 2:
            self.left = nn.Sequential(conv_bn(cin, cin, 3, 2, groups=cin, act=None), conv_bn(cin, half, 1))
        branch_in = cin if stride == 2 else half
        self.right = nn.Sequential(conv_bn(branch_in, half, 1), conv_bn(half, half, 3, stride, groups=half, act=None),
                                   conv_bn(half, half, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 2:
            out = torch.cat([self.left(x), self.right(x)], 1)
        else:
            a, b = x.chunk(2, dim=1)
            out = torch.cat([a, self.right(b)], 1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNet v2 at width 0.5x (stages of 48, 96, 192 channels) with a 1000-way head."""

    def __init__(self, widths: tuple[int, ...] = (48, 96, 192), repeats: tuple[int, ...] = (4, 8, 4)) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 24, 3, 2), nn.MaxPool2d(3, 2, 1))
        units: list[nn.Module] = []
        cin = 24
        for width, n in zip(widths, repeats, strict=True):
            units += [ShuffleUnit(cin, width, 2), *(ShuffleUnit(width, width, 1) for _ in range(n - 1))]
            cin = width
        self.units = nn.Sequential(*units, conv_bn(cin, 1024, 1))
        self.fc = nn.Linear(1024, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.units(self.stem(x)).mean((2, 3)))


class ResNeXtBlock(nn.Module):
    """ResNeXt bottleneck: 1x1 reduce, grouped 3x3 (cardinality x width), 1x1 expand, residual."""

    def __init__(self, cin: int, cout: int, stride: int, cardinality: int = 32, width: int = 4) -> None:
        super().__init__()
        mid = cardinality * width
        self.body = nn.Sequential(conv_bn(cin, mid, 1), conv_bn(mid, mid, 3, stride, groups=cardinality),
                                  conv_bn(mid, cout, 1, act=None))
        self.skip = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class ResNeXt(nn.Module):
    """The first two stages of ResNeXt-50 32x4d (grouped 3x3 convs of 32 groups of 4 and 8
    channels) on a 112x112 image, pooled into a 1000-way head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(ResNeXtBlock(64, 256, 1, 32, 4), ResNeXtBlock(256, 256, 1, 32, 4),
                                    ResNeXtBlock(256, 512, 2, 32, 8), ResNeXtBlock(512, 512, 1, 32, 8))
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


class DilatedSegmenter(nn.Module):
    """A DeepLab-style segmenter: a strided backbone, then atrous (dilated) 3x3 convs at rates
    1, 6, 12, 18 in parallel plus image pooling (ASPP), fused by a 1x1 conv into 21 classes."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.backbone = nn.Sequential(conv_bn(3, 32, 3, 2), conv_bn(32, width, 3, 2), conv_bn(width, width, 3, 2),
                                      conv_bn(width, width, 3, 1, dilation=2))
        self.branches = nn.ModuleList([conv_bn(width, width, 1)] +
                                      [conv_bn(width, width, 3, dilation=r) for r in (6, 12, 18)])
        self.pool = conv_bn(width, width, 1)
        self.fuse = nn.Sequential(conv_bn(5 * width, width, 1), nn.Conv2d(width, 21, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.backbone(x)
        pooled = self.pool(f.mean((2, 3), keepdim=True)).expand(-1, -1, f.shape[2], f.shape[3])
        return self.fuse(torch.cat([*(b(f) for b in self.branches), pooled], 1))


class UNet(nn.Module):
    """U-Net: three down steps (two 3x3 convs, max-pool), a bottleneck, three up steps
    (transposed conv, concat with the skip, two 3x3 convs), a 1x1 head."""

    def __init__(self, base: int = 16, classes: int = 2) -> None:
        super().__init__()
        widths = [base, 2 * base, 4 * base]
        self.down = nn.ModuleList()
        cin = 3
        for w in widths:
            self.down.append(nn.Sequential(conv_bn(cin, w), conv_bn(w, w)))
            cin = w
        self.bottom = nn.Sequential(conv_bn(cin, 8 * base), conv_bn(8 * base, 8 * base))
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        cin = 8 * base
        for w in reversed(widths):
            self.up.append(nn.ConvTranspose2d(cin, w, 2, 2))
            self.merge.append(nn.Sequential(conv_bn(2 * w, w), conv_bn(w, w)))
            cin = w
        self.head = nn.Conv2d(cin, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for step in self.down:
            x = step(x)
            skips.append(x)
            x = torch.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips), strict=True):
            x = merge(torch.cat([up(x), skip], 1))
        return self.head(x)


class CSPBlock(nn.Module):
    """A YOLO cross-stage-partial block: half the channels through residual 3x3 pairs, the
    other half straight across, concatenated and mixed by a 1x1 conv (SiLU throughout)."""

    def __init__(self, cin: int, cout: int, depth: int) -> None:
        super().__init__()
        half = cout // 2
        self.a = conv_bn(cin, half, 1, act=nn.SiLU)
        self.b = conv_bn(cin, half, 1, act=nn.SiLU)
        self.blocks = nn.ModuleList(nn.Sequential(conv_bn(half, half, 1, act=nn.SiLU),
                                                  conv_bn(half, half, 3, act=nn.SiLU)) for _ in range(depth))
        self.out = conv_bn(2 * half, cout, 1, act=nn.SiLU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.a(x)
        for block in self.blocks:
            a = a + block(a)
        return self.out(torch.cat([a, self.b(x)], 1))


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast: three chained 5x5 max-pools concatenated with their input."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.reduce = conv_bn(ch, ch // 2, 1, act=nn.SiLU)
        self.out = conv_bn(2 * ch, ch, 1, act=nn.SiLU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = [self.reduce(x)]
        for _ in range(3):
            y.append(torch.max_pool2d(y[-1], 5, 1, 2))
        return self.out(torch.cat(y, 1))


class YoloDetector(nn.Module):
    """A YOLOv5/v8-style detector: CSP backbone with SPPF, an FPN top-down path (nearest
    upsample, concat), and per-level 1x1 heads predicting boxes, objectness and 80 classes
    for 3 anchors; the three levels' predictions flattened and concatenated."""

    def __init__(self, width: int = 16, classes: int = 80) -> None:
        super().__init__()
        w = [width * m for m in (1, 2, 4, 8, 16)]
        self.stem = conv_bn(3, w[0], 3, 2, act=nn.SiLU)
        self.stages = nn.ModuleList(nn.Sequential(conv_bn(w[i], w[i + 1], 3, 2, act=nn.SiLU),
                                                  CSPBlock(w[i + 1], w[i + 1], 1)) for i in range(4))
        self.sppf = SPPF(w[4])
        self.lateral = nn.ModuleList([conv_bn(w[4], w[3], 1, act=nn.SiLU), conv_bn(w[3], w[2], 1, act=nn.SiLU)])
        self.top_down = nn.ModuleList([CSPBlock(2 * w[3], w[3], 1), CSPBlock(2 * w[2], w[2], 1)])
        self.heads = nn.ModuleList(nn.Conv2d(c, 3 * (5 + classes), 1) for c in (w[2], w[3], w[4]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        p5 = self.sppf(feats[3])
        p4 = self.top_down[0](torch.cat([nn.functional.interpolate(self.lateral[0](p5), scale_factor=2.0),
                                         feats[2]], 1))
        p3 = self.top_down[1](torch.cat([nn.functional.interpolate(self.lateral[1](p4), scale_factor=2.0),
                                         feats[1]], 1))
        preds = [head(p).flatten(2) for head, p in zip(self.heads, (p3, p4, p5), strict=True)]
        return torch.cat(preds, 2).transpose(1, 2).sigmoid()


class SequenceTagger(nn.Module):
    """A recurrent tagger: a two-layer LSTM (or GRU) over a feature sequence, a linear head per step."""

    def __init__(self, cell: type[nn.LSTM] | type[nn.GRU] = nn.LSTM, features: int = 128, hidden: int = 256,
                 classes: int = 32) -> None:
        super().__init__()
        self.rnn = cell(features, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0])


class FirstOutput(nn.Module):
    """A library model whose first output (logits, last hidden state) is the graph's only output:
    the exporters see one tensor instead of a ModelOutput."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.model(*inputs)[0]


Built = tuple[nn.Module, tuple[torch.Tensor, ...]]


def shufflenet_v2() -> Built:
    """ShuffleNet v2 0.5x at 224x224."""
    return ShuffleNetV2(), (torch.randn(1, 3, 224, 224),)


def resnext() -> Built:
    """ResNeXt 32x4d stages 1-2 at 112x112."""
    return ResNeXt(), (torch.randn(1, 3, 112, 112),)


def dilated_segmenter() -> Built:
    """The ASPP segmenter at 256x256."""
    return DilatedSegmenter(), (torch.randn(1, 3, 256, 256),)


def unet() -> Built:
    """U-Net (base 16 channels) at 128x128."""
    return UNet(), (torch.randn(1, 3, 128, 128),)


def yolo() -> Built:
    """The YOLO-style detector (base 16 channels) at 256x256."""
    return YoloDetector(), (torch.randn(1, 3, 256, 256),)


def lstm() -> Built:
    """A 2-layer LSTM tagger, 128 features -> hidden 256, 64 steps."""
    return SequenceTagger(nn.LSTM), (torch.randn(1, 64, 128),)


def gru() -> Built:
    """A 2-layer GRU tagger, 128 features -> hidden 256, 64 steps."""
    return SequenceTagger(nn.GRU), (torch.randn(1, 64, 128),)


def bert_encoder() -> Built:
    """Two BERT-base encoder layers of torch.nn (hidden 768, 12 heads, FFN 3072, GELU) at sequence 128."""
    layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (torch.randn(1, 128, 768),)


def mlp() -> Built:
    """A transformer FFN block at batch 32: 1024 -> 4096 -> GELU -> 1024."""
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)), (torch.randn(32, 1024),)


def resnet18_torchvision() -> Built:
    """torchvision's ResNet-18 (the GPU check's; torchvision needs a torch build that matches it)."""
    import torchvision

    return torchvision.models.resnet18(weights=None), (torch.randn(1, 3, 224, 224),)


def mobilenet_v2_torchvision() -> Built:
    """torchvision's MobileNetV2 (the GPU check's)."""
    import torchvision

    return torchvision.models.mobilenet_v2(weights=None), (torch.randn(1, 3, 224, 224),)
