"""Attention found at the TE level and connected across its contractions
(compiler/schedule/tilegraph/attention.py): the fused graph computes what the unfused one
does, the group's parts are recognised, and its blocks fit the cache."""

from __future__ import annotations

import copy
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.backends import backend_for
from compiler.bench.attention_blocks import llama_attention
from compiler.cost.attention import attention_footprint
from compiler.frontend import import_model
from compiler.ir.attention import match_attention
from compiler.ir.graph import Graph
from compiler.ir.graph_interp import run_graph
from compiler.ir.te import Const, Var, call, walk
from compiler.schedule.attention_tile import attention_tilings, register_rows
from compiler.schedule.cuda_attention_tile import attention_fits
from compiler.schedule.plan import ATTENTION_VECTORS_PER_PASS
from compiler.schedule.tilegraph.attention import fuse_attention
from compiler.schedule.tilegraph.broadcast import reshaped
from compiler.schedule.tilegraph.registers import fuse
from compiler.target import get_target
from tests.compiler.attention_kit import attention_feeds, attention_model


def fused(m: onnx.ModelProto) -> Graph:
    """The model's graph after register fusion and attention, checked against the unfused graph."""
    graph = import_model(m.SerializeToString())
    feeds = attention_feeds(m) if any(i.name in {"q", "k"} for i in m.graph.input) else {
        graph.tensors[t].name: np.random.default_rng(0).standard_normal(graph.tensors[t].shape).astype(np.float32)
        for t in graph.inputs}
    before = run_graph(copy.deepcopy(graph), feeds)
    fuse_attention(fuse(graph))
    after = run_graph(graph, feeds)
    for name, ref in before.items():
        np.testing.assert_allclose(after[name], ref, rtol=1e-5, atol=1e-6)
    return graph


def test_gqa_group_reads_the_shared_head_by_index() -> None:
    graph = fused(attention_model(batch=2, heads=4, kv_heads=2, seq=5, head_dim=8, mask="causal_trilu"))
    (node,) = graph.nodes
    parts = match_attention(node.compute)
    assert parts is not None and parts.batch == (2, 4) and not parts.k_transposed and not parts.nan_to_zero
    # key head b1 // 2 of the graph's own input: no copy of it is made
    assert Var("b1") not in parts.k.indices and graph.tensors[node.inputs[parts.k.input]].shape == (2, 2, 5, 8)


def test_block_writes_its_output_where_the_heads_merge_back() -> None:
    graph = fused(llama_attention(seq=6, hidden=32, heads=4, kv_heads=2))
    (group,) = [n for n in graph.nodes if n.compute.stages]
    parts = match_attention(group.compute)
    assert parts is not None and parts.out_axes == ("b0", "i", "b1", "d")


def split_heads_attention(batch: int = 2, seq: int = 6, heads: int = 3, d: int = 8) -> onnx.ModelProto:
    """Attention over heads split from [batch, seq, heads * d] projections as the dynamo
    exporter writes it: each head split a Reshape and a Transpose, K transposed again
    through a 3-d view, and Q and K^T each scaled by d^-1/4 after their transposes."""
    root = np.array(d ** -0.25, np.float32)
    shapes = {"split": [batch, seq, heads, d], "flat": [batch * heads, seq, d], "kt4": [batch, heads, d, seq]}
    nodes = [
        helper.make_node("Reshape", ["q", "split"], ["q4"]),
        helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Mul", ["qt", "root"], ["qs"]),
        helper.make_node("Reshape", ["k", "split"], ["k4"]),
        helper.make_node("Transpose", ["k4"], ["kh"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["kh", "flat"], ["k3"]),
        helper.make_node("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1]),
        helper.make_node("Reshape", ["k3t", "kt4"], ["kt"]),
        helper.make_node("Mul", ["kt", "root"], ["ks"]),
        helper.make_node("Reshape", ["v", "split"], ["v4"]),
        helper.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qs", "ks"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "vt"], ["o"]),
    ]
    g = helper.make_graph(nodes, "split_heads",
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, seq, heads * d]) for x in "qkv"],
                          [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(root, "root"),
                           *(numpy_helper.from_array(np.array(v, np.int64), k) for k, v in shapes.items())])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_scaled_head_splits_are_read_through_and_their_scales_move_to_the_scores() -> None:
    """No copy of Q, K or V is made: the group reads the projections by index, and the
    scales Q and K^T were multiplied by as they were copied scale the scores instead."""
    graph = fused(split_heads_attention())
    (node,) = graph.nodes
    parts = match_attention(node.compute)
    assert parts is not None and parts.k_transposed is False
    assert {graph.tensors[graph.storage_of(t)].shape for t in node.inputs} == {(2, 6, 24)}
    consts = [e.value for e in walk(parts.score) if isinstance(e, Const)]
    assert math.prod(consts) == pytest.approx(8 ** -0.5, rel=1e-6)


@pytest.mark.parametrize(("mask", "keys", "offset"), [("causal_trilu", None, 0), ("causal_where", None, 0),
                                                      ("causal_additive", 11, 4)])
def test_a_constant_causal_mask_is_read_as_a_comparison(mask: str, keys: int | None, offset: int) -> None:
    graph = fused(attention_model(heads=2, seq=7, keys=keys, mask=mask))
    (node,) = graph.nodes
    parts = match_attention(node.compute)
    assert parts is not None and parts.causal is not None and parts.causal.offset == offset
    assert len(node.inputs) == 3 and parts.causal.bound <= -1e9


def test_a_constant_mask_of_zeros_is_read_as_zero() -> None:
    # one query behind six keys: it sees them all, the mask is zeros
    graph = fused(attention_model(seq=1, keys=6, mask="causal_additive"))
    (node,) = graph.nodes
    parts = match_attention(node.compute)
    assert parts is not None and parts.causal is None and len(node.inputs) == 3
    assert parts.score == call("div", Var("acc", "float32"), Const(4.0, "float32"))  # the 0 added dropped


@pytest.mark.parametrize("near_miss", [{"softmax_axis": -2}, {"outputs": ("o", "p")}])
def test_near_misses_are_left_alone(near_miss: dict) -> None:
    graph = fused(attention_model(seq=6, **near_miss))
    assert not any(match_attention(n.compute) for n in graph.nodes)


def test_a_split_dimension_reads_by_division() -> None:
    h, j = Var("h"), Var("j")
    assert reshaped((h, j), (8, 5), (2, 4, 5)) == (call("floordiv", h, Const(4, "int64")),
                                                    call("floormod", h, Const(4, "int64")), j)
    assert reshaped((Const(0, "int64"), h, j), (1, 8, 5), (8, 5)) == (h, j)


def test_blocks_fit_the_cache_and_the_registers() -> None:
    graph = fused(attention_model(heads=2, seq=200, head_dim=64))
    (node,) = graph.nodes
    parts = match_attention(node.compute)
    assert parts is not None
    target = get_target("cpu")
    for tile, _ in attention_tilings(node.compute, parts, target, 5):
        bq, bk, rows, sub = tile.attention
        assert bq * parts.head_dim * 4 <= target.level("l1").capacity
        assert attention_footprint(parts, bq, bk) <= target.level("l2").capacity // 2
        assert rows == register_rows(target)
        # the values' product walks keys in pieces whose value rows fit half of L1
        assert sub == bk or (sub < bk and sub % rows == 0)
        assert sub * parts.value_dim * 4 <= target.level("l1").capacity // 2 or sub == rows


@pytest.mark.parametrize("preset, rows", [("cpu:x86-64-v4", 6), ("cpu:x86-64-v3", 2), ("cpu:x86-64-v2", 2)])
def test_register_rows_fill_the_vector_registers(preset: str, rows: int) -> None:
    """Each pass keeps `rows` x ATTENTION_VECTORS_PER_PASS accumulators, the vectors it loads and a
    broadcast in registers: AVX-512's 32 hold 6 rows, AVX2's and SSE's 16 two."""
    target = get_target(preset)
    assert register_rows(target) == rows
    def needed(r: int) -> int:
        return (r + 1) * ATTENTION_VECTORS_PER_PASS + 1
    assert needed(rows) <= target.registers < needed(rows + 1)


def test_the_cuda_backend_fuses_attention_whose_blocks_fit_shared_memory() -> None:
    target = get_target("cuda:a100")
    made = {}
    for head_dim in (64, 2048):  # a head of 2048 floats: no key block fits 48 KB beside the queries
        graph = import_model(attention_model(seq=8, head_dim=head_dim).SerializeToString())
        fuse(graph)
        backend_for(target).partition(graph, target)
        made[head_dim] = [p for p in (match_attention(n.compute) for n in graph.nodes) if p is not None]
    assert len(made[64]) == 1 and attention_fits(made[64][0])
    assert not made[2048]
