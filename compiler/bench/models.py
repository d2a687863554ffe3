"""Small models built in code (no downloads): the test and benchmark zoo.

Each builder returns an `onnx.ModelProto` with random weights from a fixed seed,
shaped the way exporters (PyTorch, tf2onnx) write these layers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    """Accumulates nodes and initializers with generated names."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}_{self._n}"

    def weight(self, shape: tuple[int, ...], scale: float | None = None) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else 1.0 / np.sqrt(max(1, fan_in))
        name = self.name("w")
        arr = (self.rng.standard_normal(shape) * s).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def const(self, arr: np.ndarray) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name("n"), **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, inputs: list[tuple[str, list[int | str]]], outputs: list[tuple[str, str]],
              opset: int = 17, name: str = "model") -> onnx.ModelProto:
        vin = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
        vout = []
        for graph_name, value in outputs:
            self.nodes.append(helper.make_node("Identity", [value], [graph_name], name=self.name("n")))
            vout.append(helper.make_tensor_value_info(graph_name, TensorProto.FLOAT, None))
        g = helper.make_graph(self.nodes, name, vin, vout, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="tileforge-zoo")
        m.ir_version = 8
        return onnx.shape_inference.infer_shapes(m)


def mlp_gelu(batch: int = 8, dims: tuple[int, ...] = (256, 512, 512, 512, 128)) -> onnx.ModelProto:
    """A 4-layer MLP with GELU (the Gelu op, opset 20) between layers."""
    b = _Builder(1)
    x = "x"
    for i in range(len(dims) - 1):
        x = b.op("Gemm", [x, b.weight((dims[i + 1], dims[i])), b.weight((dims[i + 1],), 0.1)], transB=1)
        if i < len(dims) - 2:
            x = b.op("Gelu", [x])
    return b.model([("x", [batch, dims[0]])], [("y", x)], opset=20, name="mlp")


def _gelu_erf(b: _Builder, x: str) -> str:
    """GELU the way PyTorch exports it: 0.5 * x * (1 + erf(x / sqrt(2)))."""
    e = b.op("Erf", [b.op("Div", [x, b.const(np.float32(np.sqrt(2.0)))])])
    return b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, b.const(np.float32(1.0))])]),
                        b.const(np.float32(0.5))])


def transformer_encoder(seq: int = 64, hidden: int = 256, heads: int = 4, ffn: int = 1024,
                        batch: int | str = 1) -> onnx.ModelProto:
    """One post-LN transformer encoder layer: QKV, softmax attention, out-proj, residuals,
    LayerNorm, FFN with GELU."""
    b = _Builder(2)
    hd = hidden // heads
    x = "x"

    def proj(inp: str, n_in: int, n_out: int) -> str:
        return b.op("Add", [b.op("MatMul", [inp, b.weight((n_in, n_out))]), b.weight((n_out,), 0.1)])

    def split_heads(t: str) -> str:
        r = b.op("Reshape", [t, b.const(np.array([0, seq, heads, hd], np.int64))])
        return b.op("Transpose", [r], perm=[0, 2, 1, 3])

    q, k, v = (split_heads(proj(x, hidden, hidden)) for _ in range(3))
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    scores = b.op("Div", [b.op("MatMul", [q, kt]), b.const(np.float32(np.sqrt(hd)))])
    attn = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    merged = b.op("Reshape", [b.op("Transpose", [attn], perm=[0, 2, 1, 3]),
                              b.const(np.array([0, seq, hidden], np.int64))])
    h = b.op("Add", [x, proj(merged, hidden, hidden)])
    h = b.op("LayerNormalization", [h, b.weight((hidden,), 0.1), b.weight((hidden,), 0.1)],
             axis=-1, epsilon=1e-5)
    f = proj(_gelu_erf(b, proj(h, hidden, ffn)), ffn, hidden)
    y = b.op("LayerNormalization", [b.op("Add", [h, f]), b.weight((hidden,), 0.1),
                                    b.weight((hidden,), 0.1)], axis=-1, epsilon=1e-5)
    return b.model([("x", [batch, seq, hidden])], [("y", y)], opset=17, name="encoder")


def _conv_bn(b: _Builder, x: str, cin: int, cout: int, k: int, stride: int = 1,
             group: int = 1, relu: bool = True) -> str:
    w = b.weight((cout, cin // group, k, k))
    c = b.op("Conv", [x, w], kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride],
             group=group)
    bn = b.op("BatchNormalization", [c, b.const((1 + 0.1 * b.rng.standard_normal(cout)).astype(np.float32)),
                                     b.const((0.1 * b.rng.standard_normal(cout)).astype(np.float32)),
                                     b.const((0.1 * b.rng.standard_normal(cout)).astype(np.float32)),
                                     b.const((1 + 0.1 * b.rng.random(cout)).astype(np.float32))],
              epsilon=1e-5)
    return b.op("Relu", [bn]) if relu else bn


def conv_stage(channels: int = 32, size: int = 32, batch: int = 1) -> onnx.ModelProto:
    """Conv+BN+Relu x3 with a residual add, then MaxPool (a ResNet-like stage)."""
    b = _Builder(3)
    x = _conv_bn(b, "x", 3, channels, 3)
    h = _conv_bn(b, x, channels, channels, 3)
    h = _conv_bn(b, h, channels, channels, 3, relu=False)
    y = b.op("Relu", [b.op("Add", [x, h])])
    y = b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    return b.model([("x", [batch, 3, size, size])], [("y", y)], name="conv_stage")


def depthwise_separable(channels: int = 32, size: int = 32, blocks: int = 2) -> onnx.ModelProto:
    """MobileNet-style blocks: depthwise 3x3 + BN + Relu, pointwise 1x1 + BN + Relu;
    then global average pooling."""
    b = _Builder(4)
    x = _conv_bn(b, "x", 3, channels, 3, stride=2)
    c = channels
    for _ in range(blocks):
        x = _conv_bn(b, x, c, c, 3, group=c)
        x = _conv_bn(b, x, c, 2 * c, 1)
        c *= 2
    y = b.op("GlobalAveragePool", [x])
    return b.model([("x", [1, 3, size, size])], [("y", y)], name="dw_separable")


def lstm_unrolled(steps: int = 8, batch: int = 4, inp: int = 64, hidden: int = 128) -> onnx.ModelProto:
    """An LSTM unrolled over `steps` from MatMul/Add/Sigmoid/Tanh (gates i, f, g, o)."""
    b = _Builder(5)
    wx, wh = b.weight((inp, 4 * hidden)), b.weight((hidden, 4 * hidden))
    bias = b.weight((4 * hidden,), 0.1)
    h = b.const(np.zeros((batch, hidden), np.float32))
    c = b.const(np.zeros((batch, hidden), np.float32))
    split = b.const(np.array([hidden] * 4, np.int64))
    for t in range(steps):
        xt = b.op("Squeeze", [b.op("Slice", [
            "x", b.const(np.array([t], np.int64)), b.const(np.array([t + 1], np.int64)),
            b.const(np.array([0], np.int64))]), b.const(np.array([0], np.int64))])
        gates = b.op("Add", [b.op("Add", [b.op("MatMul", [xt, wx]), b.op("MatMul", [h, wh])]), bias])
        i, f, g, o = b.op("Split", [gates, split], n_out=4, axis=1)
        c = b.op("Add", [b.op("Mul", [b.op("Sigmoid", [f]), c]),
                         b.op("Mul", [b.op("Sigmoid", [i]), b.op("Tanh", [g])])])
        h = b.op("Mul", [b.op("Sigmoid", [o]), b.op("Tanh", [c])])
    return b.model([("x", [steps, batch, inp])], [("h", h), ("c", c)], name="lstm")


def small_map_head(channels: int = 64, size: int = 4, classes: int = 10) -> onnx.ModelProto:
    """A network's last stage: a 3x3 convolution doubling the channels of a small map, with
    bias, Relu and a residual input, then a classifier over the flattened map. Few outputs
    over long reductions: the shape a GPU runs split-K (compiler/schedule/split_k.py)."""
    b = _Builder(6)
    wide = 2 * channels
    c = b.op("Conv", ["x", b.weight((wide, channels, 3, 3)), b.weight((wide,), 0.1)],
             kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    h = b.op("Add", [b.op("Relu", [c]), "skip"])
    y = b.op("Gemm", [b.op("Flatten", [h]), b.weight((classes, wide * size * size)), b.weight((classes,), 0.1)],
             transB=1)
    return b.model([("x", [1, channels, size, size]), ("skip", [1, wide, size, size])], [("y", y)],
                   name="small_map_head")


ZOO: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp_gelu": mlp_gelu,
    "transformer_encoder": transformer_encoder,
    "conv_stage": conv_stage,
    "depthwise_separable": depthwise_separable,
    "lstm_unrolled": lstm_unrolled,
}
