"""onnx's shape inference, made cheap for large models: a leaf module (it needs only onnx),
so that the frontend and the runtime's validation both use it without either importing
the other.
"""

from __future__ import annotations

import math

import onnx
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from onnx import ModelProto

# Initializers up to this many elements keep their data through shape inference: shape
# arithmetic (data propagation) reads small 1-D tensors only.
SHAPE_DATA_ELEMENTS = 1024
_DATA_FIELDS = frozenset({"raw_data", "float_data", "double_data", "int32_data", "int64_data",
                          "uint64_data", "string_data"})


def infer_shapes(model: ModelProto, data_prop: bool = False) -> ModelProto:
    """onnx's shape inference of `model`, run on a copy that leaves out the data of large
    initializers (onnx serializes what it is given and parses it back: for a 209 MB model
    three copies of its weights, for shapes that need only their dims).

    Returns that copy with the inferred value infos, graph outputs and nodes (their
    subgraphs' value infos): its large initializers have dims and no data. `model` itself
    is left as it was."""
    light = ModelProto()
    _copy_fields(model, light, skip={"graph"})
    _copy_fields(model.graph, light.graph, skip={"initializer"})
    for t in model.graph.initializer:
        if math.prod(t.dims) > SHAPE_DATA_ELEMENTS:
            _copy_fields(t, light.graph.initializer.add(), skip=_DATA_FIELDS)
        else:
            light.graph.initializer.add().CopyFrom(t)
    return onnx.shape_inference.infer_shapes(light, data_prop=data_prop)


def _copy_fields(src: Message, dst: Message, skip: set[str] | frozenset[str]) -> None:
    """Copy the fields of `src` that are set, but those named in `skip`, into `dst`. (Not
    through ListFields, which would make a bytes object of every skipped raw_data.)"""
    for fd in src.DESCRIPTOR.fields:
        if fd.name in skip:
            continue
        value = getattr(src, fd.name)
        if _repeated(fd):
            getattr(dst, fd.name).extend(value)
        elif not src.HasField(fd.name):
            continue
        elif fd.message_type is not None:
            getattr(dst, fd.name).CopyFrom(value)
        else:
            setattr(dst, fd.name, value)


def _repeated(fd: FieldDescriptor) -> bool:
    # protobuf 7 has only `is_repeated`; releases before 5.29 have only `label`
    return fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
