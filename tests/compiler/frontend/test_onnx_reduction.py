"""Reductions, arg-reductions and CumSum against onnxruntime."""

import numpy as np
import pytest
from frontend_kit import check_op, make_model, random
from onnx import helper

from compiler.frontend import import_model
from compiler.ir.te import Var, loads_of

REDUCES = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


@pytest.mark.parametrize("op", REDUCES)
@pytest.mark.parametrize("axes", [[1], [-1], [0, 2], None])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_as_input(op, axes, keepdims):
    x = random((3, 4, 5), low=0.1, high=2)
    weights = {} if axes is None else {"axes": np.array(axes, np.int64)}
    check_op(op, {"x": x}, weights, keepdims=keepdims)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_reduce_axes_as_attribute(op):
    x = random((3, 4, 5), low=0.1, high=2)
    opset = 12 if op != "ReduceSum" else 11
    check_op(op, {"x": x}, opset=opset, axes=[0, -1], keepdims=0)


def test_reduce_noop_with_empty_axes():
    check_op("ReduceSum", {"x": random((3, 4))}, noop_with_empty_axes=1)


def test_last_axis_reduction_keeps_reduce_axis_innermost():
    model = make_model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                       {"x": random((3, 4, 5))}, ["y"], {"axes": np.array([2], np.int64)})
    (node,) = import_model(model).nodes
    (ld,) = loads_of(node.compute)
    assert ld.indices == (Var("i0"), Var("i1"), Var("r0"))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{"axis": 1}, {"axis": -1, "keepdims": 0}, {"axis": 0, "select_last_index": 1}])
def test_arg_reductions(op, attrs):
    x = random((4, 5, 3), np.int64, 1, 0, 3)  # many ties
    check_op(op, {"x": x}, **attrs)
    check_op(op, {"x": random((4, 5, 3))}, **attrs)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(exclusive, reverse):
    check_op("CumSum", {"x": random((3, 5))}, {"axis": np.array(1, np.int64)}, exclusive=exclusive, reverse=reverse)
