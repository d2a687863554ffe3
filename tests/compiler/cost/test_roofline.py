"""The roofline rows: FLOPs and bytes from the TE analyses, measured bounds, time lost."""

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from te_operators import matmul

from compiler.cost.analysis import TileAnalysis
from compiler.cost.roofline import (
    KernelTime,
    kernel_work,
    measured_bounds,
    roofline_report,
    roofline_row,
)
from compiler.cost.shortfall import shortfall
from compiler.ir.te import ACC, Axis, Compute, Load, TensorType, Var, call
from compiler.pipeline import compile_model
from compiler.target import get_target
from compiler.target.cpu import CpuFacts, cpu_target

PEAK, BANDWIDTH = 100e9, 20e9  # FLOP/s and bytes/s "measured" on the test machine


def _machine(measured: bool = True, cores: int = 4):
    facts = CpuFacts("x86_64", "test", cores, 3.0, {1: 32 << 10, 2: 1 << 20, 3: 32 << 20}, 64,
                     ("avx", "avx2", "fma"), 16 << 30)
    numbers = {"dram_bandwidth": BANDWIDTH, "flops_1thread": PEAK / cores, "flops_all_threads": PEAK}
    return cpu_target(facts, numbers if measured else None, "gcc (test) 12")


def _add(n: int) -> Compute:
    i = Var("i")
    return Compute(axes=(Axis("i", n),), body=Load(0, (i,), "float32") + Load(1, (i,), "float32"),
                   inputs=(TensorType((n,), "float32"), TensorType((n,), "float32")),
                   dtype="float32", label="Add")


def test_matmul_and_add_work_follow_the_formulas():
    m, n, k = 64, 48, 32
    t = _machine()
    assert kernel_work(matmul(m, n, k), t) == (2 * m * n * k, (m * k + k * n + m * n) * 4)
    assert kernel_work(_add(4096), t) == (4096, 3 * 4096 * 4)
    # the bytes are the TE analyses' compulsory traffic, not a second counter
    assert kernel_work(_add(4096), t)[1] == TileAnalysis(_add(4096)).compulsory(64)


def test_compute_bound_matmul_row():
    m = n = k = 256
    row = roofline_row(KernelTime(0, "tf_a", matmul(m, n, k), (64, 64), 500.0), _machine(),
                       measured_bounds(_machine()))
    flops, nbytes = 2 * m * n * k, 3 * m * m * 4
    assert row.bound == "compute"
    assert row.bound_us == pytest.approx(flops / PEAK * 1e6, abs=1e-3)
    assert row.gflops == pytest.approx(flops / 500e-6 / 1e9, rel=1e-3)
    assert row.gbs == pytest.approx(nbytes / 500e-6 / 1e9, rel=1e-3)
    assert row.pct_of_bound == pytest.approx(100 * flops / PEAK / 500e-6, abs=0.1)
    assert row.lost_us == pytest.approx(500.0 - flops / PEAK * 1e6, abs=1e-3)


def test_memory_bound_add_row_and_its_share_of_the_model():
    n = 1 << 20
    row = roofline_row(KernelTime(1, "tf_b", _add(n), (1 << 16,), 1000.0), _machine(),
                       measured_bounds(_machine()), model_us=4000.0)
    assert row.bound == "memory"
    assert row.bound_us == pytest.approx(3 * n * 4 / BANDWIDTH * 1e6, abs=1e-3)
    assert row.pct_of_bound == pytest.approx(100 * 3 * n * 4 / BANDWIDTH / 1e-3, abs=0.1)
    assert row.share == 0.25
    assert row.reason == ""  # 16 tasks for 4 cores, read once: the plan names no shortfall


def test_rows_sorted_by_time_lost_not_by_time():
    t = _machine()
    slow_but_near_bound = KernelTime(0, "tf_mm", matmul(512, 512, 512), (64, 64), 2800.0)
    fast_but_far = KernelTime(1, "tf_add", _add(1 << 20), (1 << 16,), 2000.0)
    report = roofline_report([slow_but_near_bound, fast_but_far], t, model_us=5000.0)
    assert [r["symbol"] for r in report["rows"]] == ["tf_add", "tf_mm"]
    assert report["bounds"] == {"peak_gflops": 100.0, "bandwidth_gbs": 20.0}
    lost = [r["lost_us"] for r in report["rows"]]
    assert lost == sorted(lost, reverse=True)


def test_threads_scale_the_peak_not_the_shared_dram():
    bounds = measured_bounds(_machine().with_units(2))
    assert (bounds.peak_flops, bounds.bandwidth) == (PEAK / 2, BANDWIDTH)


def test_unmeasured_targets_have_no_bounds_and_say_so():
    for t in (_machine(measured=False), get_target("cpu:x86-64-v3"), get_target("cuda:a100")):
        report = roofline_report([KernelTime(0, "tf_a", _add(1024), (256,), 3.0)], t)
        assert report["bounds"] is None and "--measure" in report["note"]
        row = report["rows"][0]
        assert row["bound"] is None and row["pct_of_bound"] is None and row["lost_us"] is None
        assert row["flops"] == 1024 and row["gflops"] == pytest.approx(1024 / 3e-6 / 1e9, rel=1e-3)


def test_shortfall_names_idle_cores_and_rereads_from_the_plan():
    t = _machine(cores=4)
    assert shortfall(_add(4096), (2048,), t) == "2 tasks for 4 cores"
    # 8x8 blocks of a 256^3 matmul re-read A's rows and B's columns per block
    assert "compulsory bytes" in shortfall(matmul(256, 256, 256), (8, 8), t)
    assert shortfall(_add(4096), (256,), t) == ""
    slow = roofline_row(KernelTime(0, "tf_a", _add(4096), (2048,), 1000.0), t, measured_bounds(t))
    assert slow.pct_of_bound < 50 and slow.reason == "2 tasks for 4 cores"


def test_shortfall_names_the_operations_per_output_that_are_no_multiply_adds():
    """A SiLU epilogue after 16 multiply-adds per output: its exp and divide count as one FLOP
    each, where they cost an FMA's many times (whichever bound is the larger)."""
    t = _machine(cores=4)
    mm = matmul(64, 256, 16)
    acc = Var(ACC, "float32")
    silu = dataclasses.replace(mm, post=acc / (1.0 + call("exp", -acc)))
    assert shortfall(silu, (16, 64), t) == "div, exp per output, each counted as one FLOP, beside 16 multiply-adds"
    assert shortfall(mm, (16, 64), t) == ""
    row = roofline_row(KernelTime(0, "tf_s", silu, (16, 64), 1000.0), t, measured_bounds(t))
    assert row.bound == "compute" and "div, exp per output" in row.reason


def test_a_fused_row_group_moves_its_inputs_and_output_once():
    rows, cols = 64, 256
    f = TensorProto.FLOAT
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "softmax",
                              [helper.make_tensor_value_info("x", f, [rows, cols])],
                              [helper.make_tensor_value_info("y", f, [rows, cols])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    plan = compile_model(model, "cpu", {"validate": False}).plan
    (group,) = [k.compute for k in plan.kernels if k.compute.stages]
    assert kernel_work(group, _machine()) == (group.flops(), 2 * rows * cols * 4)
    # its members' exp and divide are named (no tiling reasons: its tasks follow its rows)
    assert shortfall(group, (1,) * len(group.axes), _machine()) == "exp, div per output, each counted as one FLOP"


def test_shortfall_names_small_or_shallow_gemms():
    """What a GEMM costs besides its multiply-adds (its operands packed or copied, its
    accumulators loaded and stored) is amortized over M x N x K: a group of 8 channels at
    7 x 7 is GEMMs of 8 x 224, 72 deep; a stem convolution reduces 27 deep."""
    t = _machine(cores=1)  # one task of the whole matmul, read once: no other reason
    mm = matmul(256, 256, 256)
    assert shortfall(mm, (256, 256), t, gemms=((8, 224, 72),)) == "GEMM of 8 x 224, 72 deep"
    assert shortfall(mm, (256, 256), t, gemms=((32, 14336, 27), (8, 224, 72), (32, 14336, 27))) == \
        "GEMMs of 32 x 14336, 27 deep, 8 x 224, 72 deep"
    assert shortfall(mm, (256, 256), t, gemms=((256, 256, 256),)) == ""


def test_shortfall_names_bounds_near_the_ridge():
    t = _machine(cores=1)  # one task of the whole matmul, read once: no other reason
    mm = matmul(256, 256, 256)
    assert shortfall(mm, (256, 256), t, bounds_us=(110.0, 94.0)) == "near the ridge: 94 us of bytes beside 110 us of FLOPs"
    assert shortfall(mm, (256, 256), t, bounds_us=(110.0, 40.0)) == ""
    assert shortfall(mm, (256, 256), t, bounds_us=(0.0, 0.0)) == ""
    # from a row: a 1x1 projection's bytes and FLOPs both near the larger bound
    proj = matmul(12544, 16, 32)
    row = roofline_row(KernelTime(0, "tf_p", proj, (256, 16), 300.0, gemms=((12544, 16, 32),)), t,
                       measured_bounds(t))
    assert row.pct_of_bound < 50 and "near the ridge" in row.reason


def test_the_plan_gives_each_kernel_its_gemms():
    from compiler.bench.models import conv_stage
    from compiler.pipeline import kernel_times

    plan = compile_model(conv_stage(8, 16), "cpu", {"validate": False, "measure": False}).plan
    times = kernel_times(plan, {k.symbol: 1.0 for k in plan.kernels})
    convs = [k for k in times if "Conv" in k.ops]
    assert convs and all(k.gemms for k in convs if plan.kernels[[p.symbol for p in plan.kernels].index(k.symbol)]
                         .tile.gemm is not None)
    assert all(len(g) == 3 and min(g) > 0 for k in times for g in k.gemms)


def _dilated_conv(side: int, dilation: int, stride: int = 1, channels: int = 2) -> Compute:
    """A 3x3 convolution padded to keep the map (`pad = dilation`), NCHW."""
    n, co, h, w, c, kh, kw = (Var(a) for a in ("n", "co", "h", "w", "c", "kh", "kw"))
    out = (side + 2 * dilation - 2 * dilation - 1) // stride + 1
    x = Load(0, (n, c, h * stride + kh * dilation - dilation, w * stride + kw * dilation - dilation), "float32",
             pad=0.0)
    return Compute((Axis("n", 1), Axis("co", 2), Axis("h", out), Axis("w", out)),
                   x * Load(1, (co, c, kh, kw), "float32"),
                   (TensorType((1, channels, side, side), "float32"), TensorType((2, channels, 3, 3), "float32")),
                   "float32", (Axis("c", channels), Axis("kh", 3), Axis("kw", 3)), "sum", label="Conv")


@pytest.mark.parametrize(("side", "dilation", "stride"), [(6, 3, 1), (7, 1, 2), (5, 4, 1), (8, 2, 2)])
def test_useful_flops_leave_out_the_taps_on_padding(side, dilation, stride):
    import itertools

    from compiler.ir.affine import in_bounds_points

    c = _dilated_conv(side, dilation, stride)
    out = c.shape[2]
    inside = sum(1 for h, w, kh, kw in itertools.product(range(out), range(out), range(3), range(3))
                 if 0 <= h * stride + (kh - 1) * dilation < side and 0 <= w * stride + (kw - 1) * dilation < side)
    points = inside * 2 * 2  # output channels x input channels: never on padding
    assert in_bounds_points(c) == points
    assert TileAnalysis(c).useful_flops() == points * 2 < c.flops()
    assert TileAnalysis(matmul(8, 8, 8)).useful_flops() == matmul(8, 8, 8).flops()  # no padding


def test_a_dilated_convolution_is_priced_by_the_taps_it_reads():
    # ASPP at dilation 18 on a 32 x 32 map: 60 of 96 taps a dimension read the map
    c = _dilated_conv(32, 18)
    assert TileAnalysis(c).useful_flops() / c.flops() == pytest.approx((60 / 96) ** 2)
    assert kernel_work(c, _machine())[0] == TileAnalysis(c).useful_flops()


def test_shortfall_names_work_the_flops_leave_out():
    """A GEMM's multiply-adds beyond the counted ones (taps on padding, positions past row
    ends) and its padded input copied per call, each from the plan's `gemm_work`."""
    t = _machine(cores=1)  # one task of the whole matmul, read once: no other reason
    mm = matmul(256, 256, 256)
    macs, compulsory = 256 ** 3, 3 * 256 * 256 * 4
    assert shortfall(mm, (256, 256), t, gemm_work=(macs, 0)) == ""
    assert shortfall(mm, (256, 256), t, gemm_work=(2 * macs, 0)) == \
        "its GEMM runs 2.0x the multiply-adds counted (taps on padding, positions past row ends)"
    assert shortfall(mm, (256, 256), t, gemm_work=(macs, compulsory // 4)) == ""
    assert shortfall(mm, (256, 256), t, gemm_work=(macs, compulsory)) == \
        "copies 0.8 MiB of padded input per call (1.0x the compulsory bytes)"


def test_the_plan_gives_a_gemm_read_in_place_its_copy_and_its_multiply_adds():
    """A stride-2 3x3 convolution read in place: its input copied padded (into phases) at
    every call, named where it falls short; its multiply-adds at least the counted ones."""
    from compiler.pipeline import kernel_times

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 32, 3, 3)).astype(np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])
    graph = helper.make_graph([conv], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 64, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 32, 32])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    plan = compile_model(model.SerializeToString(), get_target("cpu:x86-64-v3"),
                         {"validate": False, "measure": False, "threads": 1}).plan
    (k,) = kernel_times(plan, {k.symbol: 1e5 for k in plan.kernels})  # far below any bound
    direct = plan.kernels[0].tile.gemm.direct
    assert direct is not None and direct.copied  # the plan under test: patches read from a padded copy
    macs, copied = k.gemm_work()
    assert macs >= 0.95 * TileAnalysis(k.compute).useful_flops() / 2
    assert copied >= 32 * 64 * 64 * 4  # the whole input, padded
    row = roofline_row(k, _machine(cores=1), measured_bounds(_machine(cores=1)))
    assert "MiB of padded input per call" in row.reason


def test_a_chain_names_its_shallow_members_and_recomputed_halos():
    """MobileNetV2's stride-2 inverted residual as one chain (planned by the model for a named
    target): far below its bound, its 16-deep expansion and 9-tap depthwise are named, and
    with tiles of one row the halo rows its tiles compute twice."""
    from compiler.bench.cnn_blocks import inverted_residual_stage
    from compiler.pipeline import kernel_times

    target = get_target("cpu:sapphirerapids").with_units(2)
    plan = compile_model(inverted_residual_stage(16, 56, stride=2).SerializeToString(), target,
                         {"validate": False, "measure": False, "threads": 2}).plan
    chains = [k for k in kernel_times(plan, {k.symbol: 1e5 for k in plan.kernels}) if k.chain_rows is not None]
    assert chains, "the plan under test runs the block as a chain"
    k = chains[0]
    row = roofline_row(k, _machine(cores=2), measured_bounds(_machine(cores=2)))
    assert "16, 9 deep" in row.reason
    one_row = roofline_row(dataclasses.replace(k, chain_rows=1), _machine(cores=2), measured_bounds(_machine(cores=2)))
    assert "halo rows computed twice" in one_row.reason and "halo" not in row.reason  # 7 rows a tile: 1.05x
