"""GraphTurbo's partition (compiler/schedule/partition.py) and the chain analysis it stands
on (compiler/ir/chain.py): split factors, merges across one down-sampling, halos, order."""

from dataclasses import replace

from compiler import frontend
from compiler.bench.cnn_blocks import inverted_residual_stage, mbconv_stage
from compiler.ir.chain import Span, chain_shape, task_kinds, task_spans
from compiler.ir.graph import Graph
from compiler.schedule.parallel import runs_serially
from compiler.schedule.partition import (
    fuse_chains,
    is_chain_group,
    peak_live_bytes,
    plan_chain,
    split_factor,
)
from compiler.schedule.tilegraph.registers import fuse
from compiler.target.registry import get_target


def _cpu(l2: int = 2 << 20, units: int = 2):
    t = get_target("cpu").with_units(units)
    levels = tuple(replace(lv, capacity=l2) if lv.name == "l2" else lv for lv in t.levels)
    return replace(t, levels=levels)


def _graph(model) -> Graph:
    g = frontend.import_model(model.SerializeToString())
    fuse(g)
    return g


def test_split_factor_is_the_smallest_power_of_two_that_fits() -> None:
    assert split_factor(100, 100) == 1
    assert split_factor(101, 100) == 2
    assert split_factor(399, 100) == 4
    assert split_factor(401, 100) == 8


def test_inverted_residual_merges_into_one_chain_with_halo() -> None:
    g = fuse_chains(_graph(inverted_residual_stage(24, 56)), _cpu())
    assert len(g.nodes) == 1 and is_chain_group(g.nodes[0].compute)
    shape = chain_shape(g.nodes[0].compute)
    # the expand convolution computes a row above and below the tile for the 3x3 window
    assert shape is not None and shape.halos == ((1, 1), (0, 0), (0, 0))
    plan = plan_chain(g.nodes[0].compute, _cpu())
    assert plan is not None and plan.depth_first and plan.split == 2 and plan.rows == 14


def test_a_tile_with_its_halos_fits_the_l2() -> None:
    # the whole map's 3.9 MB split 4 ways gives 14-row tiles, but with the expand's halo
    # rows a tile holds 1.05 MB: past a 1 MiB L2 (Zen 4), so tiles of 7 rows
    l2 = 1 << 20
    g = fuse_chains(_graph(inverted_residual_stage(24, 56)), _cpu(l2=l2))
    c = g.nodes[0].compute
    shape, plan = chain_shape(c), plan_chain(c, _cpu(l2=l2))
    assert shape is not None and plan is not None and plan.depth_first
    assert split_factor(peak_live_bytes(c, shape), l2) == plan.split == 4 and plan.rows == 7
    spans, _ = task_spans(shape, plan.rows, plan.rows)
    assert peak_live_bytes(c, shape, spans) <= l2 < peak_live_bytes(c, shape, task_spans(shape, 14, 14)[0])


def test_a_down_sampling_block_is_one_chain_whose_expand_runs_at_twice_the_rows() -> None:
    g = fuse_chains(_graph(inverted_residual_stage(24, 56, stride=2)), _cpu())
    assert len(g.nodes) == 1 and is_chain_group(g.nodes[0].compute)
    shape = chain_shape(g.nodes[0].compute)
    # the stride-2 depthwise reads the expanded rows 2r-1 .. 2r+1
    assert shape is not None and shape.scales == (2, 1, 1) and shape.member_rows == (56, 28, 28)
    assert shape.halos == ((1, 1), (0, 0), (0, 0))
    kinds, table = task_kinds(shape, 4)
    assert kinds[table[0]].spans[0] == Span(0, 8)  # rows 0..7 of the expand for output rows 0..3
    assert kinds[table[1]].spans[0] == Span(-1, 9)  # rows 7..15 for output rows 4..7
    assert kinds[table[-1]].spans[0] == Span(-1, 9)  # rows 47..55 for 24..27: the image's last


def test_a_chain_down_samples_once_and_stops_at_the_block() -> None:
    g = fuse_chains(_graph(inverted_residual_stage(16, 56, repeats=3, stride=2)), _cpu())
    chains = [chain_shape(n.compute) for n in g.nodes if n.compute.stages]
    assert all(s is not None for s in chains)
    strided = [s for s in chains if s is not None and s.down_samples]
    assert len(strided) == 1 and len(strided[0].scales) == 3
    g = fuse_chains(_graph(mbconv_stage(24, 56, repeats=1)), _cpu())
    chains = [n for n in g.nodes if n.compute.stages]
    # the global pool of the SE block ends the first group; its two fully connected layers
    # are one small group on the calling thread; the scale is folded into the projection's
    # weights (compiler/frontend/fusion.py), which runs apart
    assert [n.op for n in chains] == ["Conv+Sigmoid+Mul+Conv+Sigmoid+Mul", "Conv+Sigmoid+Mul+Conv+Sigmoid"]
    assert [n.op for n in g.nodes][-2:] == ["Mul", "Conv+Add"]
    se = plan_chain(chains[1].compute, _cpu())
    assert se is not None and not se.depth_first and runs_serially(chains[1].compute)


def test_a_map_of_one_row_stays_breadth_first() -> None:
    # one tile holds as much as the whole tensors: depth-first needs no less memory
    g = fuse_chains(_graph(inverted_residual_stage(128, 1)), _cpu(units=1))
    assert all(not n.compute.stages for n in g.nodes)
    # unless the block is too small to repay starting threads: one kernel instead of three
    g = fuse_chains(_graph(inverted_residual_stage(24, 1)), _cpu(units=1))
    assert len(g.nodes) == 1 and runs_serially(g.nodes[0].compute)


def test_task_kinds_differ_only_at_the_edges() -> None:
    g = fuse_chains(_graph(inverted_residual_stage(8, 19)), _cpu(l2=16 << 10))
    shape = chain_shape(g.nodes[0].compute)
    assert shape is not None
    kinds, table = task_kinds(shape, 4)
    assert len(table) == 5 and table[0] != table[1] and table[1] == table[2] == table[3] != table[4]
    assert kinds[table[0]].spans[0] == Span(0, 5)  # no row above the image
    assert kinds[table[1]].spans[0] == Span(-1, 6)
    assert kinds[table[4]].rows == 3 and kinds[table[4]].spans[0] == Span(-1, 4)
