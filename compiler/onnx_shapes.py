"""onnx's shape inference, made cheap for large models: a leaf module (it needs only onnx),
so that the frontend and the runtime's validation both use it without either importing
the other.
"""

from __future__ import annotations

import math

import onnx
from onnx import ModelProto

# Initializers up to this many elements keep their data through shape inference: shape
# arithmetic (data propagation) reads small 1-D tensors only.
SHAPE_DATA_ELEMENTS = 1024
_DATA_FIELDS = ("raw_data", "float_data", "double_data", "int32_data", "int64_data", "uint64_data",
                "string_data")


def infer_shapes(model: ModelProto, data_prop: bool = False) -> ModelProto:
    """onnx's shape inference run on a copy without the data of large initializers (it
    serializes the whole model and parses it back: 3 s of a 436 MB BERT-base compile,
    twice, for shapes that need only the weights' dims); returns a copy of `model` with
    the inferred value infos, graph outputs and nodes (their subgraphs' value infos)."""
    light = ModelProto()
    light.CopyFrom(model)  # a deep copy: about 0.1 s for 436 MB
    for t in light.graph.initializer:
        if math.prod(t.dims) > SHAPE_DATA_ELEMENTS:
            for name in _DATA_FIELDS:
                t.ClearField(name)
    inferred = onnx.shape_inference.infer_shapes(light, data_prop=data_prop).graph
    out = ModelProto()
    out.CopyFrom(model)
    for name in ("value_info", "output", "node"):
        del getattr(out.graph, name)[:]
        getattr(out.graph, name).extend(getattr(inferred, name))
    return out
