"""Issue 16's CNN blocks end to end on the CPU: EfficientNet's MBConv with squeeze-excitation
and MobileNetV2's inverted residual, built with onnx.helper (compiler/bench/cnn_blocks.py),
run as convolution chain groups (compiler/schedule/partition.py) and matched against
onnxruntime; odd sizes, batch 2 and down-sampling blocks. The kernels' shapes are the
cost model's decisions (measuring is off: on a loaded host a timing may split a group back);
chain members blocked as packed GEMMs are checked for the build machine and AVX2."""

from pathlib import Path

import pytest

import compiler.schedule.chain_members as chain_members
from compiler.bench.cnn_blocks import inverted_residual_stage, mbconv_stage
from compiler.pipeline import compile_model
from compiler.schedule.lane_conv import LaneConv
from compiler.schedule.per_channel import per_channel_choices

_OPTS = {"tolerance": 1e-4, "threads": 2, "measure": False}


def _chains(result) -> list[dict]:
    return [k for k in result.kernels if "chain" in k["tile"]]


@pytest.mark.parametrize(("channels", "size", "batch", "stride"), [
    (16, 19, 1, 1),
    (8, 7, 2, 1),
    (16, 14, 1, 2),
])
def test_mbconv_se_matches_onnxruntime(channels: int, size: int, batch: int, stride: int, tmp_path: Path) -> None:
    model = mbconv_stage(channels, size, repeats=2, batch=batch, stride=stride)
    result = compile_model(model, "cpu", _OPTS, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    chains = _chains(result)
    # the second block is whole: expand + depthwise as one group, SE scale + project + add as another
    assert any(k["ops"][:2] == ["Conv", "Sigmoid"] and k["ops"].count("Conv") == 2 for k in chains)
    assert any(k["ops"][0] == "Mul" and "Conv" in k["ops"] for k in chains)
    # the squeeze-excitation's two fully connected layers: one small kernel on the calling thread
    assert any(k["ops"] == ["Conv", "Sigmoid", "Mul", "Conv", "Sigmoid"] and k["tile"]["serial"] for k in chains)


def test_mbconv_se_scale_runs_on_the_projection_weights(tmp_path: Path) -> None:
    """At 56 x 56 the SE gate scales the 1x1 projection's weights (24 x 144, 1/130 of the
    map: compiler/frontend/fusion.py `ChannelScaleFolding`), a small kernel of its own; the
    projection reads the unscaled map, and the block still matches onnxruntime."""
    result = compile_model(mbconv_stage(24, 56, repeats=1), "cpu", _OPTS, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    assert not any(k["ops"][0] == "Mul" and "Conv" in k["ops"] for k in result.kernels)
    assert any(k["ops"] == ["Mul"] and k["tile"]["serial"] for k in result.kernels)


@pytest.mark.parametrize(("size", "batch"), [(29, 1), (7, 2), (28, 1)])
def test_inverted_residual_relu6_is_one_kernel(size: int, batch: int, tmp_path: Path) -> None:
    model = inverted_residual_stage(16, size, repeats=1, batch=batch)
    result = compile_model(model, "cpu", _OPTS, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    assert len(result.kernels) == 1 and _chains(result)
    assert result.kernels[0]["ops"].count("Conv") == 3


@pytest.mark.parametrize(("target", "size", "batch"), [("cpu", 40, 1), ("cpu", 41, 2), ("cpu:x86-64-v3", 33, 1)])
def test_strided_inverted_residual_is_one_chain_across_its_down_sampling(target: str, size: int, batch: int,
                                                                          tmp_path: Path) -> None:
    # even and odd maps (41 rows down-sample to 21: the last tile's expand rows end at the image)
    model = inverted_residual_stage(16, size, repeats=2, batch=batch, stride=2)
    result = compile_model(model, target, _OPTS, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    # the first block (expand at the full size, the stride-2 depthwise, project) is one
    # chain, made before the second block's chain could take its projection
    assert _chains(result)[0]["ops"] == ["Conv", "Clip", "Conv", "Clip", "Conv"]


@pytest.mark.parametrize(("target", "size", "batch"), [("cpu", 19, 2), ("cpu:x86-64-v3", 13, 1)])
def test_gemm_members_match_onnxruntime(target: str, size: int, batch: int, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # every deep 1x1 member takes the packed GEMM (the loop tile counts as holding nothing):
    # the projection, once per kind of task, each copy with its own micro-kernels in the
    # chain's one translation unit
    monkeypatch.setattr(chain_members, "_accumulators", lambda tile, target: 0)
    model = inverted_residual_stage(16, size, repeats=1, batch=batch)
    result = compile_model(model, target, _OPTS, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    gemms = [m for k in _chains(result) for kind in k["tile"]["members"] for m in kind if m.get("gemm")]
    assert len(result.kernels) == 1 and len(gemms) >= 2
    assert all(m["gemm"]["k"] >= chain_members.MIN_KC for m in gemms)


@pytest.mark.parametrize("target", ["cpu", "cpu:x86-64-v3"])
def test_members_narrower_than_a_vector_take_planes_and_gemms(target: str, tmp_path: Path) -> None:
    # a 7-wide map fills no vector of either ISA: the loop nests would run scalar, so the
    # 1x1 members take the packed GEMM however shallow, the depthwise one its planes
    model = inverted_residual_stage(16, 7, repeats=1, batch=2)
    result = compile_model(model, target, _OPTS, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    members = [m for k in _chains(result) for kind in k["tile"]["members"] for m in kind]
    assert len(result.kernels) == 1 and members
    assert any(m.get("plane") for m in members)
    assert any(m.get("gemm") and m["gemm"]["k"] < chain_members.MIN_KC for m in members)


@pytest.mark.parametrize("target", ["cpu", "cpu:x86-64-v3"])
def test_a_depthwise_member_with_channels_in_lanes_matches_onnxruntime(target: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # the depthwise member takes channels in lanes wherever they fit (compiler/schedule/
    # lane_conv.py; on AVX-512 the model picks them here anyway), rendered inside the chain
    # on the scratch the chain hands it
    def lanes_first(c, vector: int, lanes: int, l1: int):
        ways = [way for _, way in per_channel_choices(c, vector, lanes, l1)]
        return next((w for w in ways if isinstance(w, LaneConv)), ways[0])
    monkeypatch.setattr(chain_members, "planned_per_channel", lanes_first)
    model = inverted_residual_stage(32, 7, repeats=2)
    result = compile_model(model, target, _OPTS, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    members = [m for k in _chains(result) for kind in k["tile"]["members"] for m in kind]
    assert any("channel" in (m.get("plane") or {}) for m in members)
