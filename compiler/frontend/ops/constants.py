"""Operators whose results are known at compile time: Constant, Shape, Size, Range, ..."""

from __future__ import annotations

import math

import numpy as np
from onnx import SparseTensorProto, numpy_helper

from compiler.frontend.dtypes import ir_dtype
from compiler.frontend.exprs import compute, idx, out_index, scalar
from compiler.frontend.names import shown
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import from_numpy
from compiler.ir.te import call, cast, select


def _dense(cx: OpContext, sparse: SparseTensorProto) -> np.ndarray:
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dims = tuple(int(d) for d in sparse.dims)
    what = f"sparse constant of node {shown(cx.name)}"
    cx.builder.check_shape(dims, what)
    if math.prod(dims) * values.dtype.itemsize > cx.builder.limits.max_weight_bytes:
        raise cx.error(f"{what} is larger than the weight limit once dense")
    out = np.zeros(math.prod(dims), dtype=values.dtype)
    flat = indices if indices.ndim == 1 else np.ravel_multi_index(tuple(indices.T), dims)
    out[flat] = values
    return out.reshape(dims)


@lowering("Constant")
def constant(cx: OpContext) -> Outputs:
    a = cx.attrs
    if "value" in a:
        arr = np.asarray(a["value"])
    elif "value_float" in a:
        arr = np.asarray(a["value_float"], np.float32)
    elif "value_floats" in a:
        arr = np.asarray(a["value_floats"], np.float32)
    elif "value_int" in a:
        arr = np.asarray(a["value_int"], np.int64)
    elif "value_ints" in a:
        arr = np.asarray(a["value_ints"], np.int64)
    elif "sparse_value" in a:
        arr = _dense(cx, a["sparse_value"])
    else:
        raise cx.unsupported(f"constant attribute {sorted(a)} (string constants are not supported)")
    return [cx.constant(arr)]


@lowering("Shape")
def shape(cx: OpContext) -> Outputs:
    dims = cx.input(0).shape
    start, end = cx.attr("start", 0), cx.attr("end", len(dims))
    return [cx.constant(np.asarray(dims[slice(start, end)], np.int64))]


@lowering("Size")
def size(cx: OpContext) -> Outputs:
    return [cx.constant(np.asarray(math.prod(cx.input(0).shape), np.int64))]


def fill(cx: OpContext, shape: tuple[int, ...], value: float | int | bool, dt: str) -> Value:
    """A tensor of one value: a constant when small, else a kernel with no inputs."""
    return cx.emit(compute(shape, scalar(value, dt), []), [])


@lowering("ConstantOfShape")
def constant_of_shape(cx: OpContext) -> Outputs:
    dims = tuple(int(d) for d in cx.const_input(0, "shape").reshape(-1))
    value = cx.attr("value")
    if value is None:
        value = np.zeros(1, np.float32)
    value = np.asarray(value).reshape(-1)
    return [fill(cx, dims, value[0].item(), from_numpy(value.dtype))]


@lowering("Range")
def range_(cx: OpContext) -> Outputs:
    start, limit, delta = (np.asarray(cx.const_input(i, name)).reshape(-1)[0]
                           for i, name in enumerate(("start", "limit", "delta")))
    if float(delta) == 0:
        raise cx.error("delta is zero")
    n = max(math.ceil((float(limit) - float(start)) / float(delta)), 0)
    dt = from_numpy(np.asarray(start).dtype)
    (i,) = out_index(1)
    # start + i * delta as a kernel: folded to a constant when small, computed at run time when not
    body = scalar(start.item(), dt) + cast(i, dt) * scalar(delta.item(), dt)
    return [cx.emit(compute((n,), body, []), [])]


@lowering("EyeLike")
def eye_like(cx: OpContext) -> Outputs:
    x = cx.input(0)
    dt = ir_dtype(int(cx.attr("dtype")), "EyeLike dtype") if "dtype" in cx.attrs else x.dtype
    if x.rank != 2:
        raise cx.error("input must be 2-D")
    i, j = out_index(2)
    body = select(call("eq", j - i, idx(cx.attr("k", 0))), scalar(1, dt), scalar(0, dt))
    return [cx.emit(compute(x.shape, body, []), [])]
