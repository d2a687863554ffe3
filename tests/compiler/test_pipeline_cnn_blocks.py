"""Issue 16's CNN blocks end to end on the CPU: EfficientNet's MBConv with squeeze-excitation
and MobileNetV2's inverted residual, built with onnx.helper (compiler/bench/cnn_blocks.py),
run as convolution chain groups (compiler/schedule/partition.py) and matched against
onnxruntime; odd sizes, batch 2 and a down-sampling block."""

from pathlib import Path

import pytest

from compiler.bench.cnn_blocks import inverted_residual_stage, mbconv_stage
from compiler.pipeline import compile_model


def _chains(result) -> list[dict]:
    return [k for k in result.kernels if "chain" in k["tile"]]


@pytest.mark.parametrize(("channels", "size", "batch", "stride"), [
    (16, 19, 1, 1),
    (8, 7, 2, 1),
    (16, 14, 1, 2),
])
def test_mbconv_se_matches_onnxruntime(channels: int, size: int, batch: int, stride: int, tmp_path: Path) -> None:
    model = mbconv_stage(channels, size, repeats=2, batch=batch, stride=stride)
    result = compile_model(model, "cpu", {"tolerance": 1e-4, "threads": 2}, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    chains = _chains(result)
    # the second block is whole: expand + depthwise as one group, SE scale + project + add as another
    assert any(k["ops"][:2] == ["Conv", "Sigmoid"] and k["ops"].count("Conv") == 2 for k in chains)
    assert any(k["ops"][0] == "Mul" and "Conv" in k["ops"] for k in chains)


@pytest.mark.parametrize(("size", "batch"), [(19, 1), (7, 2), (28, 1)])
def test_inverted_residual_relu6_is_one_kernel(size: int, batch: int, tmp_path: Path) -> None:
    model = inverted_residual_stage(16, size, repeats=1, batch=batch)
    result = compile_model(model, "cpu", {"tolerance": 1e-4, "threads": 2}, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    assert len(result.kernels) == 1 and _chains(result)
    assert result.kernels[0]["ops"].count("Conv") == 3


def test_strided_inverted_residual_stops_at_down_sampling(tmp_path: Path) -> None:
    model = inverted_residual_stage(16, 20, repeats=2, stride=2)
    result = compile_model(model, "cpu", {"tolerance": 1e-4, "threads": 2}, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    for k in _chains(result):
        assert k["tile"]["chain"]["split"] >= 1
    # the strided depthwise convolution is no member of any group
    assert any(k["ops"] == ["Conv", "Clip"] and "chain" not in k["tile"] for k in result.kernels)
