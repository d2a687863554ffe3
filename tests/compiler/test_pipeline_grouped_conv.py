"""Grouped convolutions end to end on the CPU (a group axis of their own, compiler/frontend/
ops/contraction.py): RegNet's and ResNeXt's group widths, with bias and Relu, compiled with
constant weights (packed at load) and matched against onnxruntime."""

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.pipeline import compile_model


@pytest.mark.parametrize(("channels", "width", "size", "stride"), [
    (48, 16, 20, 1),  # RegNet widths: 16 and 8 channels a group
    (24, 8, 15, 2),
    (32, 4, 12, 1),  # ResNeXt 32x4d: 4 channels a group
    (12, 4, 7, 1),
])
def test_grouped_conv_relu_matches_onnxruntime(channels: int, width: int, size: int, stride: int,
                                               tmp_path: Path) -> None:
    rng = np.random.default_rng(channels + width)
    weights = [numpy_helper.from_array(rng.standard_normal((channels, width, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["z"], group=channels // width, pads=[1, 1, 1, 1],
                              strides=[stride, stride]),
             helper.make_node("Relu", ["z"], ["y"])]
    graph = helper.make_graph(nodes, "grouped", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                               [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    result = compile_model(model, "cpu", {"tolerance": 1e-4}, output=tmp_path / "a.tar.gz")
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
