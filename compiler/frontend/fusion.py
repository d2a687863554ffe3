"""Graph rewrites on ONNX nodes before lowering: BatchNormalization folded into Conv."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from onnx import NodeProto, helper

from compiler.frontend.loader import all_nodes
from compiler.frontend.values import Value


def _attr(node: NodeProto, name: str, default: float | int) -> float | int:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


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
    readers = Counter(i for n in all_nodes(nodes) for i in n.input if i)  # subgraphs read too
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
