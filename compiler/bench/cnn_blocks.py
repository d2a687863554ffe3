"""CNN blocks of issue 16 built in code (onnx.helper): EfficientNet's MBConv with
squeeze-excitation and MobileNetV2's inverted residual, and their benchmark.

Run alone: `python -m compiler.bench.cnn_blocks --threads 2`.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import onnx

from compiler.bench.measure import BenchResult, bench_model
from compiler.bench.models import _Builder


def _bn(b: _Builder, x: str, c: int) -> str:
    return b.op("BatchNormalization", [x, b.const((1 + 0.1 * b.rng.standard_normal(c)).astype(np.float32)),
                                       b.const((0.1 * b.rng.standard_normal(c)).astype(np.float32)),
                                       b.const((0.1 * b.rng.standard_normal(c)).astype(np.float32)),
                                       b.const((1 + 0.1 * b.rng.random(c)).astype(np.float32))], epsilon=1e-5)


def _conv(b: _Builder, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,
          bias: bool = False) -> str:
    ins = [x, b.weight((cout, cin // group, k, k))] + ([b.weight((cout,), 0.1)] if bias else [])
    return b.op("Conv", ins, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride], group=group)


def _silu(b: _Builder, x: str) -> str:
    return b.op("Mul", [x, b.op("Sigmoid", [x])])


def _relu6(b: _Builder, x: str) -> str:
    return b.op("Clip", [x, b.const(np.float32(0.0)), b.const(np.float32(6.0))])


def _squeeze_excite(b: _Builder, x: str, c: int, squeezed: int) -> str:
    """Global average pool, FC (1x1 conv) + SiLU, FC + Sigmoid, channel scale (as torchvision)."""
    s = b.op("GlobalAveragePool", [x])
    s = _silu(b, _conv(b, s, c, squeezed, 1, bias=True))
    s = b.op("Sigmoid", [_conv(b, s, squeezed, c, 1, bias=True)])
    return b.op("Mul", [x, s])


def mbconv(b: _Builder, x: str, cin: int, cout: int, expand: int = 6, k: int = 3, stride: int = 1,
           se_ratio: float = 0.25) -> str:
    """EfficientNet's MBConv: 1x1 expand + BN + SiLU, depthwise kxk + BN + SiLU, SE,
    1x1 project + BN, residual add where shapes allow."""
    mid = cin * expand
    h = _silu(b, _bn(b, _conv(b, x, cin, mid, 1), mid)) if expand != 1 else x
    h = _silu(b, _bn(b, _conv(b, h, mid, mid, k, stride, group=mid), mid))
    if se_ratio:
        h = _squeeze_excite(b, h, mid, max(1, int(cin * se_ratio)))
    h = _bn(b, _conv(b, h, mid, cout, 1), cout)
    return b.op("Add", [x, h]) if stride == 1 and cin == cout else h


def inverted_residual(b: _Builder, x: str, cin: int, cout: int, expand: int = 6, stride: int = 1) -> str:
    """MobileNetV2's inverted residual: 1x1 expand + BN + ReLU6, depthwise 3x3 + BN + ReLU6,
    1x1 project + BN, residual add where shapes allow."""
    mid = cin * expand
    h = _relu6(b, _bn(b, _conv(b, x, cin, mid, 1), mid))
    h = _relu6(b, _bn(b, _conv(b, h, mid, mid, 3, stride, group=mid), mid))
    h = _bn(b, _conv(b, h, mid, cout, 1), cout)
    return b.op("Add", [x, h]) if stride == 1 and cin == cout else h


def mbconv_stage(channels: int = 24, size: int = 56, repeats: int = 2, batch: int = 1, stride: int = 1,
                 seed: int = 16) -> onnx.ModelProto:
    """`repeats` MBConv6 k3 blocks with SE 0.25 (an EfficientNet-B0 stage), the first
    down-sampling by `stride`."""
    b = _Builder(seed)
    x = "x"
    for i in range(repeats):
        x = mbconv(b, x, channels, channels, stride=stride if i == 0 else 1)
    return b.model([("x", [batch, channels, size, size])], [("y", x)], name="mbconv_stage")


def inverted_residual_stage(channels: int = 24, size: int = 56, repeats: int = 1, batch: int = 1,
                            stride: int = 1, seed: int = 17) -> onnx.ModelProto:
    """`repeats` MobileNetV2 inverted residuals (expand 6, ReLU6)."""
    b = _Builder(seed)
    x = "x"
    for i in range(repeats):
        x = inverted_residual(b, x, channels, channels, stride=stride if i == 0 else 1)
    return b.model([("x", [batch, channels, size, size])], [("y", x)], name="inverted_residual")


BLOCKS = {
    "mbconv6_se_24x56x56_x2": lambda: mbconv_stage(24, 56, 2),
    "mbconv6_se_40x28x28_x2": lambda: mbconv_stage(40, 28, 2),
    "mbv2_inverted_residual_24x56x56": lambda: inverted_residual_stage(24, 56, 1),
    "mbv2_inverted_residual_16x112x112_s2": lambda: inverted_residual_stage(16, 112, 1, stride=2),
}


def run(threads: int, options: dict | None = None) -> list[BenchResult]:
    """Compile (with `options`) and time every block against onnxruntime at `threads` threads."""
    return [bench_model(build(), name, threads=threads, options=options) for name, build in BLOCKS.items()]


def cnn_section(threads: int = 2) -> tuple[list[str], list[dict]]:
    """BENCHMARKS.md's CNN-block section (lines) and its rows for the JSON: planned by the
    cost model alone (no candidate or group timed at compile), a few seconds per block."""
    from compiler.bench.report import model_table
    from compiler.bench.sections import machine_description

    results = run(threads, {"measure": False})
    lines = ["", "## CNN blocks (issue 16)", "",
             "EfficientNet-B0's MBConv6 with squeeze-excitation (two blocks) and MobileNetV2's inverted",
             "residual (one at stride 2, its expand at 112 x 112), built in code (compiler/bench/cnn_blocks.py);",
             "convolution chains run as GraphTurbo's depth-first L2 tiles where the cost model prices them",
             "faster than their parts.", "",
             f"Measured on {machine_description()} (`--section cnn` reruns this section alone).", "",
             *model_table(results)]
    return lines, [r.to_dict() for r in results]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    for r in run(args.threads):
        print(json.dumps(r.to_dict()))
        for k in sorted(r.kernel_times, key=lambda k: -(k.get("measured_us") or 0)):
            print(f"    {k['measured_us']}us {'+'.join(k['ops'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
