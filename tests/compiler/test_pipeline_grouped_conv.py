"""Grouped convolutions end to end on the CPU (a group axis of their own, compiler/frontend/
ops/contraction.py): RegNet's and ResNeXt's group widths, with bias and Relu, compiled with
constant weights (packed at load) and matched against onnxruntime."""

import json
import tarfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.pipeline import compile_model
from compiler.target import get_target
from compiler.target.cpu import host_cannot_run


@pytest.mark.parametrize(("channels", "width", "size", "stride"), [
    (48, 16, 20, 1),  # RegNet widths: 16 and 8 channels a group
    (24, 8, 15, 2),
    (32, 4, 12, 1),  # ResNeXt 32x4d: 4 channels a group
    (12, 4, 7, 1),
])
def test_grouped_conv_relu_matches_onnxruntime(channels: int, width: int, size: int, stride: int,
                                               tmp_path: Path) -> None:
    model = _grouped(1, channels, width, size, stride)
    result = compile_model(model, "cpu", {"tolerance": 1e-4}, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4


@pytest.mark.parametrize("target", ["cpu", "cpu:x86-64-v3"])
@pytest.mark.parametrize(("batch", "channels", "width", "size"), [(1, 128, 16, 28), (2, 72, 24, 13)])
def test_grouped_conv_patches_are_read_in_place_per_group(target: str, batch: int, channels: int, width: int,
                                                          size: int, tmp_path: Path) -> None:
    # each group's patches read from the padded input at the group's offset (schedule/in_place.py):
    # gathered per group instead, RegNet's group width 16 ran at 0.5x onnxruntime
    if host_cannot_run(get_target(target)):
        pytest.skip(f"this host cannot run {target}")
    model = _grouped(batch, channels, width, size, 1)
    # the model's plan, not measured (measuring may pick gathering on a host where it runs faster)
    result = compile_model(model, target, {"tolerance": 1e-4, "threads": 2, "measure": False},
                           output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    with tarfile.open(result.artifact_path) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        tiles = [k["tile"] for k in json.loads(member.read())["kernels"]]
    direct = [t["gemm"]["direct"] for t in tiles if t.get("gemm") and t["gemm"].get("direct")]
    assert len(direct) == 1 and direct[0]["batch"]


def _grouped(batch: int, channels: int, width: int, size: int, stride: int) -> onnx.ModelProto:
    """Conv (groups of `width` channels, bias) + Relu on a batch x channels x size x size input."""
    rng = np.random.default_rng(channels + width)
    weights = [numpy_helper.from_array(rng.standard_normal((channels, width, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["z"], group=channels // width, pads=[1, 1, 1, 1],
                              strides=[stride, stride]),
             helper.make_node("Relu", ["z"], ["y"])]
    graph = helper.make_graph(nodes, "grouped", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                               [batch, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
