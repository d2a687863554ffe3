"""Attention as the exporters write it, built here in ONNX nodes: queries, keys and values
per head as inputs, a scale, a mask, softmax over the keys, and the product with the values."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def attention_model(batch: int = 1, heads: int = 2, kv_heads: int | None = None, seq: int = 7,
                    keys: int | None = None, head_dim: int = 16, mask: str = "padding",
                    scale_on: str = "scores", k_transposed: bool = False, softmax_axis: int = -1,
                    nan_to_zero: bool = False, fill: float = -1e9,
                    outputs: tuple[str, ...] = ("o",), opset: int = 17) -> onnx.ModelProto:
    """softmax(Q K^T * scale + mask) V over `heads` query heads.

    `kv_heads`: fewer key / value heads shared by groups of query heads (GQA, MQA: 1),
    broadcast as repeat_kv does (Unsqueeze, Expand, Reshape). `mask`: "padding" (an additive
    [batch, 1, 1, keys] input), "additive" (a [batch, 1, queries, keys] input added), "bool"
    (a [batch, 1, 1, keys] boolean input through Where), "bool_rows" (one [batch, 1, queries, keys]),
    "causal_trilu" (masked scores `fill`), "causal_where" (a lower triangle from Range and
    comparisons), "causal_additive" (a constant float [1, 1, queries, keys] mask, 0 up to the
    diagonal of the last `queries` keys and the lowest float past it, as exporters fold a
    causal mask with a cache of earlier keys), or "none".
    `scale_on`: "scores" (Div by sqrt(d)), "qk" (Q and K each times d^-1/4, as torch's SDPA
    decomposition), "q" (Mul on Q). `k_transposed`: K given as [batch, kv, head_dim, keys].
    `nan_to_zero`: NaN probabilities made 0, as torch's SDPA decomposition writes them.
    `softmax_axis` and `outputs` (of "o", "p": the probabilities) make near misses."""
    kv = kv_heads or heads
    n = keys or seq
    d = head_dim
    k_shape = [batch, kv, d, n] if k_transposed else [batch, kv, n, d]
    inputs = {"q": [batch, heads, seq, d], "k": k_shape, "v": [batch, kv, n, d]}
    weights: dict[str, np.ndarray] = {}
    nodes: list[onnx.NodeProto] = []
    k, v = "k", "v"
    if kv != heads:
        group = heads // kv
        weights.update(axis2=np.array([2], np.int64),
                       kshape5=np.array([batch, kv, group, *k_shape[2:]], np.int64),
                       vshape5=np.array([batch, kv, group, n, d], np.int64),
                       kshape4=np.array([batch, heads, *k_shape[2:]], np.int64),
                       vshape4=np.array([batch, heads, n, d], np.int64))
        for name in ("k", "v"):
            nodes += [helper.make_node("Unsqueeze", [name, "axis2"], [f"{name}5"]),
                      helper.make_node("Expand", [f"{name}5", f"{name}shape5"], [f"{name}e"]),
                      helper.make_node("Reshape", [f"{name}e", f"{name}shape4"], [f"{name}r"])]
        k, v = "kr", "vr"
    q = "q"
    if scale_on == "qk":
        weights["root"] = np.array(d ** -0.25, np.float32)
        nodes += [helper.make_node("Mul", ["q", "root"], ["qs"]), helper.make_node("Mul", [k, "root"], ["ks"])]
        q, k = "qs", "ks"
    elif scale_on == "q":
        weights["inv"] = np.array(d ** -0.5, np.float32)
        nodes.append(helper.make_node("Mul", ["q", "inv"], ["qs"]))
        q = "qs"
    if not k_transposed:
        nodes.append(helper.make_node("Transpose", [k], ["kt"], perm=[0, 1, 3, 2]))
        k = "kt"
    nodes.append(helper.make_node("MatMul", [q, k], ["s"]))
    s = "s"
    if scale_on == "scores":
        weights["sqrt_d"] = np.array(np.sqrt(d), np.float32)
        nodes.append(helper.make_node("Div", ["s", "sqrt_d"], ["ss"]))
        s = "ss"
    nodes += _mask_nodes(s, mask, batch, seq, n, inputs, weights, fill)
    nodes.append(helper.make_node("Softmax", ["masked" if mask != "none" else s], ["p"], axis=softmax_axis))
    p = "p"
    if nan_to_zero:
        weights["zero_p"] = np.array(0.0, np.float32)
        nodes += [helper.make_node("IsNaN", ["p"], ["p_nan"]), helper.make_node("Where", ["p_nan", "zero_p", "p"], ["pz"])]
        p = "pz"
    nodes.append(helper.make_node("MatMul", [p, v], ["o"]))
    types = {"bool_mask": TensorProto.BOOL}
    g = helper.make_graph(nodes, "attention",
                          [helper.make_tensor_value_info(x, types.get(x, TensorProto.FLOAT), shape)
                           for x, shape in inputs.items()],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, None) for x in outputs],
                          [numpy_helper.from_array(w, name) for name, w in weights.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _mask_nodes(s: str, mask: str, batch: int, seq: int, n: int, inputs: dict[str, list[int]],
                weights: dict[str, np.ndarray], fill: float) -> list[onnx.NodeProto]:
    """Nodes writing `masked` from scores `s` (none for mask "none")."""
    if mask == "padding":
        inputs["pad_mask"] = [batch, 1, 1, n]
        return [helper.make_node("Add", [s, "pad_mask"], ["masked"])]
    if mask == "additive":
        inputs["add_mask"] = [batch, 1, seq, n]
        return [helper.make_node("Add", [s, "add_mask"], ["masked"])]
    if mask in {"bool", "bool_rows"}:
        inputs["bool_mask"] = [batch, 1, 1 if mask == "bool" else seq, n]
        weights["neg"] = np.array(-np.inf, np.float32)
        return [helper.make_node("Where", ["bool_mask", s, "neg"], ["masked"])]
    if mask == "causal_trilu":
        weights["ones"] = np.ones((seq, n), np.float32)
        weights["big"] = np.array(fill, np.float32)
        weights["zero"] = np.array(0.0, np.float32)
        return [helper.make_node("Trilu", ["ones"], ["tri"], upper=0),
                helper.make_node("Equal", ["tri", "zero"], ["above"]),
                helper.make_node("Where", ["above", "big", s], ["masked"])]
    if mask == "causal_additive":
        later = np.arange(n)[None, :] > np.arange(seq)[:, None] + (n - seq)
        weights["causal"] = np.where(later, np.finfo(np.float32).min, 0).astype(np.float32)[None, None]
        return [helper.make_node("Add", [s, "causal"], ["masked"])]
    if mask == "causal_where":
        weights.update(start=np.array(0, np.int64), rows=np.array(seq, np.int64), cols=np.array(n, np.int64),
                       one=np.array(1, np.int64), col_axes=np.array([0], np.int64),
                       minf=np.array(np.finfo(np.float32).min, np.float32))
        return [helper.make_node("Range", ["start", "rows", "one"], ["ri"]),
                helper.make_node("Range", ["start", "cols", "one"], ["ci"]),
                helper.make_node("Unsqueeze", ["ri", "one"], ["ric"]),
                helper.make_node("Unsqueeze", ["ci", "col_axes"], ["cir"]),
                helper.make_node("Greater", ["cir", "ric"], ["future"]),
                helper.make_node("Where", ["future", "minf", s], ["masked"])]
    return []


def attention_feeds(m: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for `m`: a padding mask hides the last third of the keys of batch 0 (one
    per query row, a random third of the rest too)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for i in m.graph.input:
        shape = [x.dim_value for x in i.type.tensor_type.shape.dim]
        if i.name == "pad_mask":
            keep = np.ones(shape, bool)
            keep[0, ..., shape[-1] - shape[-1] // 3:] = False
            feeds[i.name] = np.where(keep, 0.0, -10000.0).astype(np.float32)
        elif i.name == "bool_mask":
            keep = np.ones(shape, bool)
            keep[0, ..., shape[-1] - shape[-1] // 3:] = False
            if shape[-2] > 1:  # a mask per query row: a third of the rest hidden too, never key 0
                keep &= rng.random(shape) > 1 / 3
                keep[..., 0] = True
            feeds[i.name] = keep
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds
