"""Depthwise convolutions plane by plane (compiler/schedule/plane_conv.py, compiler/codegen/c/
plane.py) end to end: odd maps, strides 1 and 2, dilation, batch 2, channel counts that are
no multiple of a vector, Clip / SiLU / bias epilogues, for this host's ISA and for named AVX2
and SSE targets (the stride-2 planes are laid out on each of them: a rendering per vector
width); each compiled model is matched against onnxruntime."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.cache import MemoryKernelCache
from compiler.pipeline import compile_model
from compiler.target import get_target
from compiler.target.cpu import host_cannot_run

TARGETS = ["cpu", "cpu:x86-64-v3", "cpu:x86-64-v2"]


def _depthwise(batch: int, channels: int, size: int, stride: int, dilation: int, epilogue: str,
               kernel: int = 3) -> bytes:
    rng = np.random.default_rng(channels * size + stride)
    inits = [numpy_helper.from_array(rng.standard_normal((channels, 1, kernel, kernel)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32), "b")]
    conv_out = "z" if epilogue else "y"
    nodes = [helper.make_node("Conv", ["x", "w", "b"], [conv_out], group=channels,
                              pads=[dilation * (kernel // 2)] * 4,
                              strides=[stride, stride], dilations=[dilation, dilation])]
    if epilogue == "clip":
        inits += [numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["z", "lo", "hi"], ["y"]))
    elif epilogue == "silu":
        nodes += [helper.make_node("Sigmoid", ["z"], ["s"]), helper.make_node("Mul", ["z", "s"], ["y"])]
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          [batch, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _planes(artifact: Path) -> list[dict]:
    with tarfile.open(artifact) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        manifest = json.loads(member.read())
    return [k["tile"]["plane"] for k in manifest["kernels"] if "plane" in k["tile"]]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("batch", "channels", "size", "stride", "dilation", "epilogue", "kernel"), [
    (1, 20, 7, 1, 1, "clip", 3),
    (2, 13, 13, 2, 1, "silu", 3),
    (1, 24, 14, 2, 1, "", 3),
    (1, 12, 13, 1, 2, "clip", 3),
    (2, 9, 8, 2, 2, "silu", 3),
    # EfficientNet's 5 x 5 stride 2 on an odd map: the phases hold different counts of rows
    # and columns (each copied row's phase loops and the last row of a phase have tails)
    (1, 10, 29, 2, 1, "silu", 5),
])
def test_depthwise_planes_match_onnxruntime(target: str, batch: int, channels: int, size: int, stride: int,
                                            dilation: int, epilogue: str, kernel: int, tmp_path: Path) -> None:
    if host_cannot_run(get_target(target)):
        pytest.skip(f"this host cannot run {target}")
    model = _depthwise(batch, channels, size, stride, dilation, epilogue, kernel)
    result = compile_model(model, target, {"tolerance": 1e-4, "threads": 2}, cache=MemoryKernelCache(),
                           output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    planes = _planes(result.artifact_path)
    if stride == 2 or get_target(target).lanes == 16:  # elsewhere micro-tiles may cost less
        # planes or, where the channels fill whole vectors and time faster, channels in lanes
        assert len(planes) == 1 and planes[0].get("phases", planes[0].get("strides")) == [stride, stride]
        assert planes[0]["lanes"] == get_target(target).lanes


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("batch", "channels", "size", "stride", "kernel", "epilogue"), [
    (2, 32, 14, 1, 7, "silu"),  # ConvNeXt's window on a 14 x 14 map, SiLU on the vectors
    (1, 16, 11, 2, 5, "clip"),  # EfficientNet's stride-2 5 x 5 on an odd map
    (1, 20, 14, 1, 7, "silu"),  # channels no vector width divides but SSE's: a partial last task
])
def test_channels_in_lanes_match_onnxruntime(target: str, batch: int, channels: int, size: int, stride: int,
                                             kernel: int, epilogue: str, tmp_path: Path) -> None:
    # unmeasured, the model's pick stands: large windows on small maps take the lanes
    if host_cannot_run(get_target(target)):
        pytest.skip(f"this host cannot run {target}")
    model = _depthwise(batch, channels, size, stride, 1, epilogue, kernel)
    result = compile_model(model, target, {"tolerance": 1e-4, "threads": 2, "measure": False},
                           cache=MemoryKernelCache(), output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    (layout,) = _planes(result.artifact_path)
    assert "channel" in layout and layout["lanes"] == get_target(target).lanes
