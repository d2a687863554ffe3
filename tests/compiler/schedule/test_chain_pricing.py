"""Convolution chains go through the group log like every other group
(compiler/schedule/tilegraph/groups.py, level "L2 tiles"): offered to the connection rule,
refused where priced slower than their parts, recorded with the rule's prices, and priced
for what the chain kernel runs (compiler/schedule/chain_members.py `chain_prices`)."""

from compiler import frontend
from compiler.bench.cnn_blocks import inverted_residual_stage, mbconv_stage
from compiler.ir.graph import Graph
from compiler.schedule.chain_members import chain_prices
from compiler.schedule.partition import fuse_chains, is_chain_group
from compiler.schedule.tilegraph.groups import GroupLog, Level
from compiler.schedule.tilegraph.pricing import Pricer
from compiler.schedule.tilegraph.registers import fuse
from compiler.target.registry import get_target

CPU = get_target("cpu").with_units(2)


def _fused(model) -> tuple[Graph, GroupLog]:
    g = frontend.import_model(model.SerializeToString())
    log = GroupLog(g, Pricer(CPU, 0.0).price)
    fuse(g, log)
    return g, log


def test_a_chain_priced_slower_is_refused() -> None:
    g = frontend.import_model(inverted_residual_stage(16, 19).SerializeToString())
    log = GroupLog(g, lambda fused, parts: (2.0, 1.0) if is_chain_group(fused) else None)
    fuse(g, log)
    kernels = len(g.nodes)
    fuse_chains(g, CPU, log)
    assert len(g.nodes) == kernels and not any(is_chain_group(n.compute) for n in g.nodes)
    refused = list(log.refused.values())
    # the whole block, then the shorter chains of the sinks before it: each priced, each refused
    assert refused and all(r.level == Level.L2_TILES and r.predicted_fused_us == 2.0 for r in refused)
    assert not any(grp.level == Level.L2_TILES for grp in log.groups.values())


def test_a_chain_is_recorded_with_the_prices_of_what_it_runs() -> None:
    g, log = _fused(inverted_residual_stage(24, 56))
    fuse_chains(g, CPU, log)
    (chain,) = [n for n in g.nodes if is_chain_group(n.compute)]
    group = log.groups[chain.output]
    assert group.level == Level.L2_TILES and len(group.members) == 6  # the lowered nodes, Add included
    fused, parts = chain_prices(chain.compute, CPU)
    assert (group.predicted_fused_us, group.predicted_unfused_us) == (round(fused, 3), round(parts, 3))
    # the expanded tensors stay in L2 (3 MB apart: they leave the caches) for a halo of one row
    assert fused < parts


def test_the_register_groups_a_chain_absorbs_leave_the_log() -> None:
    g, log = _fused(mbconv_stage(16, 19, repeats=1))
    fuse_chains(g, CPU, log)
    outputs = {n.output for n in g.nodes}
    # every group the log holds is a node of the graph (the split-back times them by output)
    assert set(log.groups) <= outputs
