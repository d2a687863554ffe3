"""Shape inference without carrying the weights through onnx (compiler/onnx_shapes.py)."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.onnx_shapes import SHAPE_DATA_ELEMENTS, infer_shapes


def _model() -> onnx.ModelProto:
    """x (2, 64) @ w (64, 32) -> Reshape by a small shape constant -> Relu."""
    w = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    assert w.size > SHAPE_DATA_ELEMENTS  # held aside while onnx infers
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Reshape", ["h", "shape"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([4, 16], np.int64), "shape")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_inferred_shapes_match_onnx_and_large_weights_stay_behind() -> None:
    model = _model()
    before = model.SerializeToString()
    ours, theirs = infer_shapes(model, data_prop=True), onnx.shape_inference.infer_shapes(model, data_prop=True)
    assert model.SerializeToString() == before  # the caller's model is untouched
    for field in ("value_info", "output", "node", "input"):
        assert list(getattr(ours.graph, field)) == list(getattr(theirs.graph, field))
    assert (ours.ir_version, list(ours.opset_import)) == (theirs.ir_version, list(theirs.opset_import))
    w, shape = ours.graph.initializer
    assert (w.name, list(w.dims), w.data_type, w.raw_data, list(w.float_data)) == ("w", [64, 32], TensorProto.FLOAT, b"", [])
    assert numpy_helper.to_array(shape).tolist() == [4, 16]  # small constants keep their data
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in ours.graph.value_info}
    assert shapes["h"] == [2, 32] and shapes["r"] == [4, 16]  # the Reshape read its small shape tensor
