"""GraphTurbo's partition (compiler/schedule/partition.py) and the chain analysis it stands
on (compiler/ir/chain.py): split factors, merges that stop at down-sampling, halos, order."""

from dataclasses import replace

from compiler import frontend
from compiler.bench.cnn_blocks import inverted_residual_stage, mbconv_stage
from compiler.ir.chain import Span, chain_shape, task_kinds
from compiler.ir.graph import Graph
from compiler.schedule.parallel import runs_serially
from compiler.schedule.partition import fuse_chains, is_chain_group, plan_chain, split_factor
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


def test_group_stops_at_down_sampling() -> None:
    g = fuse_chains(_graph(inverted_residual_stage(24, 56, stride=2)), _cpu())
    assert all(not n.compute.stages for n in g.nodes)  # expand alone gains nothing depth-first
    g = fuse_chains(_graph(mbconv_stage(24, 56, repeats=1)), _cpu())
    chains = [n for n in g.nodes if n.compute.stages]
    # the global pool of the SE block ends the first group; its two fully connected layers
    # are one small group on the calling thread; scale + project is the last
    assert [n.op for n in chains] == ["Conv+Sigmoid+Mul+Conv+Sigmoid+Mul", "Conv+Sigmoid+Mul+Conv+Sigmoid",
                                      "Mul+Conv+Add"]
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
