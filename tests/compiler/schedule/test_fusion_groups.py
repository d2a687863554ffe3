"""Fusion group records and the cost-checked connection rule (compiler/schedule/tilegraph/)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from compiler.frontend import import_model
from compiler.schedule.tilegraph.groups import NOT_MADE, GroupLog, Level, lowered_copy
from compiler.schedule.tilegraph.pricing import Pricer
from compiler.schedule.tilegraph.registers import fuse
from compiler.schedule.tilegraph.rows import fuse_rows
from compiler.target import get_target
from tests.compiler.schedule.test_fuse import model


def dense_softmax(rows: int = 64, width: int = 256):
    """MatMul -> Add (bias) -> Relu -> Softmax: a register group and a row group."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((width, width)).astype(np.float32)
    b = rng.standard_normal(width).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    return model(nodes, [("x", [rows, width])], ["y"], [("w", w), ("b", b)])


def lowered(m):
    return import_model(m.SerializeToString())


def test_every_rewrite_is_recorded_with_its_lowered_members_and_level() -> None:
    graph = lowered(dense_softmax())
    ops = {n.id: n.op for n in graph.nodes}
    log = GroupLog(graph)
    fuse_rows(fuse(graph, log), log=log)
    groups = sorted(log.groups.values(), key=lambda g: min(g.ids))
    assert [g.level for g in groups] == [Level.REGISTERS, Level.ROWS]
    dense, rows = groups
    assert [m.op for m in dense.members][:2] == ["MatMul", "Add"] and dense.members[0].constants == (1,)
    assert all(ops[m.node] == m.op for g in groups for m in g.members)
    assert dense.ids.isdisjoint(rows.ids) and dense.ids | rows.ids == set(ops)
    assert {g.output for g in groups} == {n.output for n in graph.nodes}  # fused nodes, by output
    assert groups[0].to_json()["ops"] == [m.op for m in dense.members]


def test_a_connection_priced_slower_is_not_made() -> None:
    graph = lowered(dense_softmax())
    unfused = len(graph.nodes)
    log = GroupLog(graph, rule=lambda fused, parts: (2.0, 1.0))  # every group predicted slower
    fuse_rows(fuse(graph, log), log=log)
    assert len(graph.nodes) == unfused and not log.groups
    refused = list(log.refused.values())
    assert refused and all(not g.kept and g.split_by == "model" and g.output == NOT_MADE for g in refused)
    assert refused[0].predicted_fused_us == 2.0 and refused[0].predicted_unfused_us == 1.0


def test_split_back_members_stay_apart_and_the_rest_connects() -> None:
    base = lowered(dense_softmax())
    first = lowered_copy(base)
    log = GroupLog(first)
    fuse(first, log)
    dense = next(g for g in log.groups.values() if g.members[0].op == "MatMul")
    again = lowered_copy(base)
    log2 = GroupLog(again, split=[dense.ids])
    fuse(again, log2)
    assert dense.ids not in {g.ids for g in log2.groups.values()}
    assert log2.groups and len(again.nodes) == len(first.nodes) + 1  # only the last step undone
    assert len(base.nodes) == len(log.lowered)  # the lowered graph itself is untouched


def test_the_pricer_prices_heavy_parts_with_their_best_rtiles_and_skips_light_ones() -> None:
    graph = lowered(dense_softmax(rows=256, width=512))
    matmul, add = graph.nodes[0].compute, graph.nodes[1].compute
    target = get_target("cpu:x86-64-v3").with_units(2)
    assert Pricer(target, threshold_us=1e9).price(matmul, [matmul, add]) is None
    pricer = Pricer(target, threshold_us=0.0)
    assert pricer.heavy([matmul, add])
    fused_us, parts_us = pricer.price(matmul, [matmul, add])
    assert fused_us == pricer.best(matmul).time_us
    assert parts_us == pricer.best(matmul).time_us + pricer.best(add).time_us
    assert pricer.best(add).dram_bytes >= 2 * add.inputs[0].shape[0] * add.inputs[0].shape[1] * 4


def test_the_last_plan_makes_only_groups_confirmed_before_above_register_level() -> None:
    base = lowered(dense_softmax())
    first = lowered_copy(base)
    log = GroupLog(first, rule=lambda fused, parts: (1.0, 2.0))
    fuse_rows(fuse(first, log), log=log)
    rows = next(g for g in log.groups.values() if g.level == Level.ROWS)

    unconfirmed = lowered_copy(base)
    last = GroupLog(unconfirmed, rule=lambda fused, parts: (1.0, 2.0), confirmed=[])
    fuse_rows(fuse(unconfirmed, last), log=last)
    assert [g.level for g in last.groups.values()] == [Level.REGISTERS]  # register fusion is never held back
    assert rows.ids in last.refused  # and the smaller row groups tried after it
    assert all(g.split_by == "untimed" and not g.kept for g in last.refused.values())

    confirmed = lowered_copy(base)
    again = GroupLog(confirmed, rule=lambda fused, parts: (1.0, 2.0), confirmed=[rows.ids])
    fuse_rows(fuse(confirmed, again), log=again)
    assert rows.ids in {g.ids for g in again.groups.values()} and not again.refused
