"""Cache-level connection over shared rows: one kernel per softmax / layer norm, same numbers."""

from __future__ import annotations

import copy

import numpy as np
import onnx
from onnx import helper

from compiler.frontend import import_model
from compiler.ir.graph import Graph
from compiler.ir.graph_interp import run_graph
from compiler.ir.rows import row_sharing
from compiler.ir.te import from_json, to_json
from compiler.schedule.tilegraph.registers import fuse
from compiler.schedule.tilegraph.rows import fuse_rows
from tests.compiler.schedule.test_fuse import model


def grouped(m: onnx.ModelProto, min_rows: int = 1) -> Graph:
    """The model's graph after both fusions, checked against the unfused graph."""
    graph = import_model(m.SerializeToString())
    rng = np.random.default_rng(0)
    feeds = {graph.tensors[t].name: rng.standard_normal(graph.tensors[t].shape).astype(np.float32)
             for t in graph.inputs}
    before = run_graph(copy.deepcopy(graph), feeds)
    fuse_rows(fuse(graph), min_rows)
    after = run_graph(graph, feeds)
    for name, ref in before.items():
        np.testing.assert_allclose(after[name], ref, rtol=1e-5, atol=1e-6)
    return graph


def softmax(shape: list[int], axis: int = -1) -> onnx.ModelProto:
    return model([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], [("x", shape)], ["y"])


def test_softmax_becomes_one_kernel_whose_stages_share_its_rows() -> None:
    graph = grouped(softmax([6, 40]))
    assert len(graph.nodes) == 1
    c = graph.nodes[0].compute
    assert len(c.stages) == 3 and c.inputs[0].shape == (6, 40)
    sharing = row_sharing(c)
    assert sharing is not None and sharing.rows == 1 and sharing.by_rows[0]
    assert from_json(to_json(c)) == c  # the group is part of the cache key


def test_softmax_over_a_middle_axis_shares_the_leading_rows_only() -> None:
    graph = grouped(softmax([3, 5, 7], axis=1))
    assert len(graph.nodes) == 1
    assert row_sharing(graph.nodes[0].compute).rows == 1


def test_layer_norm_reads_its_scale_whole_and_its_input_by_rows() -> None:
    rng = np.random.default_rng(3)
    g, b = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    m = model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
              [("x", [2, 9, 32])], ["y"], [("g", g), ("b", b)])
    graph = grouped(m)
    assert len(graph.nodes) == 1
    c = graph.nodes[0].compute
    sharing = row_sharing(c)
    assert sharing.rows == 2
    whole = [t.shape for t, by in zip(c.inputs, sharing.by_rows, strict=False) if not by]
    assert (32,) in whole


def test_an_intermediate_that_is_also_an_output_stays_in_memory() -> None:
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], axes=[1], keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["y"])]
    graph = grouped(model(nodes, [("x", [4, 16])], ["y", "m"]))
    assert len(graph.nodes) == 2 and not any(n.compute.stages for n in graph.nodes)


def test_too_few_rows_for_the_cores_stay_separate_kernels() -> None:
    graph = grouped(softmax([2, 64]), min_rows=4)
    assert len(graph.nodes) > 1 and not any(n.compute.stages for n in graph.nodes)


def test_rows_read_transposed_are_not_shared() -> None:
    # y = x - max over axis 0, broadcast: the max is indexed by the columns, not the rows
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], axes=[0], keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["y"])]
    graph = grouped(model(nodes, [("x", [8, 8])], ["y"]))
    assert not any(n.compute.stages for n in graph.nodes)


def test_contractions_keep_their_own_kernels() -> None:
    w = np.random.default_rng(4).standard_normal((16, 16)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"], axis=-1)]
    graph = grouped(model(nodes, [("x", [8, 16])], ["y"], [("w", w)]))
    assert any(n.compute.stages for n in graph.nodes)
    assert not any("MatMul" in s.label for n in graph.nodes for s in n.compute.stages)
    assert not any("MatMul" in n.compute.label and n.compute.stages for n in graph.nodes)


def test_windows_read_through_padding_keep_their_own_kernels() -> None:
    """YOLO's SPPF: three chained 5x5 max pools and their concatenation share (n, c) rows,
    but padded windows run staged on vectors only in kernels of their own."""
    pool = {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}
    m = model([helper.make_node("MaxPool", ["x"], ["p1"], **pool), helper.make_node("MaxPool", ["p1"], ["p2"], **pool),
               helper.make_node("Concat", ["x", "p1", "p2"], ["y"], axis=1)], [("x", [2, 8, 8, 8])], ["y"])
    assert all(not n.compute.stages for n in grouped(m).nodes)
