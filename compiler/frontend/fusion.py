"""Graph rewrites on ONNX nodes before lowering: BatchNormalization folded into Conv, and a
per-channel scale into the Conv that reads it."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto, helper

from compiler.frontend.loader import all_nodes
from compiler.frontend.values import AnyValue, Value


def _attr(node: NodeProto, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _readers(nodes: Sequence[NodeProto]) -> Counter[str]:
    """How many node inputs read each name (subgraphs' nodes too)."""
    return Counter(i for n in all_nodes(nodes) for i in n.input if i)


def _fresh(values: dict[str, Value], base: str) -> str:
    # Generated names never collide with the model's: they are only keys here.
    k = 0
    while f"\0{base}{k}" in values:
        k += 1
    return f"\0{base}{k}"


def _foldable(bn: NodeProto, conv: NodeProto, values: dict[str, Value]) -> bool:
    if any(o for o in bn.output[1:]) or _attr(bn, "training_mode", 0) or not _attr(bn, "spatial", 1):
        return False
    params = [values.get(n) for n in (*bn.input[1:5], *conv.input[1:3]) if n]
    if len(params) != 4 + len([n for n in conv.input[1:3] if n]) or any(
            p is None or not p.is_const or p.dtype != "float32" for p in params):
        return False
    w = values[conv.input[1]].array
    return w is not None and w.ndim >= 3 and all(values[n].shape == (w.shape[0],) for n in bn.input[1:5])


def fold_batchnorm_into_conv(
    nodes: Sequence[NodeProto], values: dict[str, Value], graph_outputs: set[str]
) -> list[NodeProto]:
    """Nodes with each BatchNormalization that directly follows a Conv folded into its weights.

    Applies when the Conv's output feeds only that BatchNormalization (and is
    not a graph output) and the Conv weights and normalization parameters are
    all constants; the new weights are added to `values`.
    """
    readers = _readers(nodes)
    conv_of = {n.output[0]: n for n in nodes if n.op_type == "Conv" and len(n.output) == 1}
    replaced: dict[int, NodeProto] = {}
    dropped: set[int] = set()
    for bn in nodes:
        if bn.op_type != "BatchNormalization" or not bn.input:
            continue
        conv = conv_of.get(bn.input[0])
        if conv is None or readers[bn.input[0]] != 1 or bn.input[0] in graph_outputs:
            continue
        if not _foldable(bn, conv, values):
            continue
        scale, beta, mean, var = (values[n].array for n in bn.input[1:5])
        w = values[conv.input[1]].array
        bias = values[conv.input[2]].array if len(conv.input) > 2 and conv.input[2] else 0.0
        eps = float(_attr(bn, "epsilon", 1e-5))
        s = scale / np.sqrt(var + np.float32(eps))
        new_w = (w * s.reshape(-1, *[1] * (w.ndim - 1))).astype(np.float32)
        new_b = ((bias - mean) * s + beta).astype(np.float32)
        w_name, b_name = _fresh(values, "bn_w"), _fresh(values, "bn_b")
        values[w_name] = Value.of_array(new_w, name=values[conv.input[1]].name)
        values[b_name] = Value.of_array(new_b, name=values[conv.input[1]].name + ".bias")
        fused = NodeProto()
        fused.CopyFrom(conv)
        del fused.input[:]
        fused.input.extend([conv.input[0], w_name, b_name])
        fused.output[0] = bn.output[0]
        replaced[id(conv)] = fused
        dropped.add(id(bn))
    return [replaced.get(id(n), n) for n in nodes if id(n) not in dropped]


# The weights are scaled where they are this many times smaller than the activation at
# least: then packed per call, not at load (compiler/schedule/cpu_gemm.py `_weights_side`).
# Alternating with the Mul left on the map (two threads, Intel Xeon): EfficientNet's MBConv
# stages at 56 x 56 (its projection's weights 1/130 of the map) 2-6% faster, at 28 x 28
# (1/20) 4% slower, at 19 x 19 (1/23) level; EfficientNet-B0 folded everywhere (its 14 x 14
# and 7 x 7 projections' weights outweigh their maps 2-7x) ran 5% slower.
SCALED_WEIGHTS_SHARE = 64


class ChannelScaleFolding:
    """A per-channel scale folded into the convolution that reads it: Conv(x * s, W) becomes
    Conv(x, W * s) where s varies along the channels alone (squeeze-excitation's gate before
    an MBConv block's 1x1 projection). The multiply then runs on the weights (C_out x C_in x
    taps values) where it ran on the activation (C_in x H x W), and that tensor's pass through
    memory is gone. Exact in real arithmetic; in float32 the products round differently, as
    any reassociation does. Not where the convolution reads padding: there an infinite s
    would meet the padding's 0 in W * s * 0 (NaN) where x * s had padded 0 * W.

    Shapes are known only once the Mul's inputs are lowered, so the rewrite is made node by
    node during lowering (`rewrite`); the Mul itself still lowers, and with nothing left to
    read it, pruning drops it."""

    def __init__(self, nodes: Sequence[NodeProto], graph_outputs: set[str]) -> None:
        readers = _readers(nodes)
        self._muls = {n.output[0]: n for n in nodes if n.op_type == "Mul" and len(n.input) == 2
                      and readers[n.output[0]] == 1 and n.output[0] not in graph_outputs}

    def rewrite(self, node: NodeProto, values: dict[str, AnyValue]) -> list[NodeProto]:
        """`node`, or where it is a convolution of one group reading a per-channel scale of
        its input, the weights' Mul and the convolution of the unscaled input."""
        mul = self._muls.get(node.input[0]) if node.op_type == "Conv" and len(node.input) > 1 else None
        if mul is None or _attr(node, "group", 1) != 1:
            return [node]
        w = values.get(node.input[1])
        if not isinstance(w, Value) or not _reads_no_padding(node, w):
            return [node]
        for x_name, s_name in (mul.input, reversed(mul.input)):
            x, s = values.get(x_name), values.get(s_name)
            if (isinstance(x, Value) and isinstance(s, Value) and _per_channel(s, x)
                    and x.dtype == s.dtype == w.dtype and w.rank == x.rank
                    and math.prod(w.shape) * SCALED_WEIGHTS_SHARE <= math.prod(x.shape)):
                scaled = _fresh(values, "scaled_w")
                weights = helper.make_node("Mul", [node.input[1], s_name], [scaled], name=node.name)
                conv = NodeProto()
                conv.CopyFrom(node)
                conv.input[0], conv.input[1] = x_name, scaled
                return [weights, conv]
        return [node]


def _reads_no_padding(conv: NodeProto, w: Value) -> bool:
    """Whether Conv `conv` (weights `w`) reads no padding: no pads, and SAME auto-padding
    only with a kernel of one tap."""
    auto = _attr(conv, "auto_pad", b"NOTSET")
    return not any(_attr(conv, "pads", [])) and (auto in (b"NOTSET", b"VALID") or all(d == 1 for d in w.shape[2:]))


def _per_channel(s: Value, x: Value) -> bool:
    """Whether `s`, broadcast against `x` (N, C, spatial...), is constant along all but the
    channel axis, and `x` is the product's shape (not broadcast itself)."""
    if s.rank > x.rank or x.rank < 3:
        return False
    full = (1,) * (x.rank - s.rank) + s.shape
    return full[0] == 1 and full[1] in (1, x.shape[1]) and all(d == 1 for d in full[2:])
