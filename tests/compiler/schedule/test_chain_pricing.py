"""Convolution chains go through the group log like every other group
(compiler/schedule/tilegraph/groups.py, level "L2 tiles"): offered to the connection rule,
refused where priced slower than their parts, recorded with the rule's prices, and priced
for what the chain kernel runs (compiler/schedule/chain_members.py `chain_prices`)."""

from dataclasses import replace

from compiler import frontend
from compiler.bench.cnn_blocks import inverted_residual_stage, mbconv_stage
from compiler.ir.graph import Graph
from compiler.schedule.chain_members import _packing_us, chain_prices
from compiler.schedule.cpu_gemm import with_gemm_blocking
from compiler.schedule.partition import fuse_chains, is_chain_group
from compiler.schedule.row_members import whole_task_tile
from compiler.schedule.tilegraph.groups import GroupLog, Level
from compiler.schedule.tilegraph.pricing import Pricer
from compiler.schedule.tilegraph.registers import fuse
from compiler.target.base import Target
from compiler.target.registry import get_target


def _cpu(l2: int = 2 << 20, units: int = 2) -> Target:
    # a named target: the same caches, vector width and bandwidths on every host (the host's
    # own, AVX2 with a 512 KB L2 or AVX-512 with 2 MB, would price the chains differently)
    t = get_target("cpu:sapphirerapids").with_units(units)
    return replace(t, levels=tuple(replace(lv, capacity=l2) if lv.name == "l2" else lv for lv in t.levels))


CPU = _cpu()


def _fused(model, target: Target = CPU) -> tuple[Graph, GroupLog]:
    g = frontend.import_model(model.SerializeToString())
    log = GroupLog(g, Pricer(target, 0.0).price)
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


def test_a_chain_is_timed_against_the_register_groups_it_absorbed() -> None:
    # split back, a chain runs as its members' register groups (Conv+Sigmoid+Mul), not as
    # lowered nodes one by one: the split-back times those
    g, log = _fused(mbconv_stage(16, 19, repeats=1))
    registers = {grp.members[0].node: grp for grp in log.groups.values()}
    fuse_chains(g, CPU, log)
    chains = [grp for grp in log.groups.values() if grp.level == Level.L2_TILES and grp.parts]
    assert chains
    for chain in chains:
        assert sorted(op for p in chain.apart for op in p.op.split("+")) == sorted(m.op for m in chain.members)
        assert len(chain.apart) < len(chain.members)
        assert any(p.node in registers and p.op == "+".join(m.op for m in registers[p.node].members)
                   and p.compute.stages == () for p in chain.apart)


def test_a_chain_whose_expanded_tensor_stays_in_l2_is_refused() -> None:
    # MBConv 40 channels 28x28: each core's share of the expanded tensor (376 KB) stays in
    # its L2 between the kernels, so the chain saves no traffic and recomputes its halo
    g, log = _fused(mbconv_stage(40, 28, repeats=1))
    fuse_chains(g, CPU, log)
    refused = [r for r in log.refused.values() if r.level == Level.L2_TILES]
    assert any([m.op for m in r.members][:2] == ["Conv", "Sigmoid"] and len(r.members) >= 6 for r in refused)
    assert refused[0].predicted_fused_us > refused[0].predicted_unfused_us
    # where it does not stay there (a smaller L2), the same chain is priced faster and made
    small = _cpu(l2=512 << 10)
    g, log = _fused(mbconv_stage(40, 28, repeats=1), small)
    fuse_chains(g, small, log)
    assert any(n.op.startswith("Conv+Sigmoid+Mul+Conv") and n.compute.stages and n.compute.shape[2] > 1
               for n in g.nodes)


def test_a_gemm_member_pays_for_packing_its_operands_in_every_task() -> None:
    # MBConv 112 channels 14x14: the projection (672 -> 112 channels, 301 KB of weights) runs
    # as a packed GEMM in the chain, where each task of a few rows packs the weights again
    # (a kernel apart reads them packed once, at load): priced so, the chain is refused
    g, log = _fused(mbconv_stage(112, 14, repeats=1))
    fuse_chains(g, CPU, log)
    refused = [r for r in log.refused.values() if r.level == Level.L2_TILES]
    projection = [r for r in refused if r.members[0].op.startswith("Mul")]
    assert projection and projection[0].predicted_fused_us > projection[0].predicted_unfused_us
    assert not any(n.op.startswith("Mul+Conv") and n.compute.stages for n in g.nodes)
    # the price that refuses it: a GEMM member's packing, which a loop nest does not pay
    member = next(m for m in projection[0].members if m.op.startswith("Conv"))
    gemm_tile = with_gemm_blocking(member.compute, whole_task_tile(member.compute, CPU), CPU.with_units(1))
    assert gemm_tile.gemm is not None and _packing_us(gemm_tile, CPU.with_units(1)) > 0
    assert _packing_us(replace(gemm_tile, gemm=None), CPU.with_units(1)) == 0


def test_a_member_whose_rows_run_scalar_is_priced_at_one_lane() -> None:
    # MBConv 192 channels 7x7: the projection (1152 -> 192) over a task's 2 x 7 rows is no
    # GEMM (14 columns fill no 16-lane panel) and its 7-wide rows run scalar (c/kernel.py):
    # priced at one lane, the chain is refused (as masked vectors it was made, and ran 3x
    # slower than its parts)
    g, log = _fused(mbconv_stage(192, 7, repeats=1))
    fuse_chains(g, CPU, log)
    refused = [r for r in log.refused.values() if r.level == Level.L2_TILES and r.members[0].op.startswith("Mul")]
    assert refused and refused[0].predicted_fused_us > refused[0].predicted_unfused_us
    assert not any(n.op.startswith("Mul+Conv") and n.compute.stages for n in g.nodes)
