"""ONNX element types <-> IR dtype names."""

from __future__ import annotations

from onnx import TensorProto

from compiler.errors import ModelError

_ONNX_TO_IR = {
    TensorProto.FLOAT: "float32",
    TensorProto.DOUBLE: "float64",
    TensorProto.FLOAT16: "float16",
    TensorProto.INT64: "int64",
    TensorProto.INT32: "int32",
    TensorProto.INT16: "int16",
    TensorProto.INT8: "int8",
    TensorProto.UINT64: "uint64",
    TensorProto.UINT32: "uint32",
    TensorProto.UINT16: "uint16",
    TensorProto.UINT8: "uint8",
    TensorProto.BOOL: "bool",
}


IR_ELEMENT_TYPES: frozenset[int] = frozenset(_ONNX_TO_IR)
_IR_TO_ONNX = {ir: elem for elem, ir in _ONNX_TO_IR.items()}


def onnx_elem_type(ir: str) -> int:
    """The ONNX element type of an IR dtype."""
    return _IR_TO_ONNX[ir]


def ir_dtype(elem_type: int, what: str) -> str:
    """The IR dtype of an ONNX element type; ModelError naming `what` if there is none."""
    try:
        return _ONNX_TO_IR[elem_type]
    except KeyError:
        raise ModelError(f"{what}: element type {dtype_name(elem_type)} is not supported") from None


def dtype_name(elem_type: int) -> str:
    """The IR dtype name of an element type, or its lower-cased ONNX name (e.g. "string")."""
    if elem_type in _ONNX_TO_IR:
        return _ONNX_TO_IR[elem_type]
    if elem_type in TensorProto.DataType.values():
        return TensorProto.DataType.Name(elem_type).lower()
    return str(elem_type)
