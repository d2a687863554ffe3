"""Sequence ops against onnxruntime: laid out at compile time, as lists of slices and picks."""

import numpy as np
import pytest
from frontend_kit import check_model, make_model, random
from onnx import TensorProto, helper

from compiler.errors import ModelError, UnsupportedOpError
from compiler.frontend import import_model
from compiler.frontend.registry import DataDependentShapeError


def i64(*v):
    return np.array(v, np.int64)


@pytest.mark.parametrize("split, attrs", [(None, {"keepdims": 1}), (None, {"keepdims": 0}),
                                          (i64(2).reshape(()), {}), (i64(1, 3, 1), {})])
@pytest.mark.parametrize("new_axis", [0, 1])
def test_split_to_sequence_then_pick_and_concat(split, attrs, new_axis):
    """torch.split / unbind as exported without optimization: SplitToSequence, SequenceAt,
    and the pieces joined again (ConcatFromSequence) in another order."""
    x = random((2, 5, 3))
    weights = {} if split is None else {"split": split}
    ins = ["x", "split"] if split is not None else ["x"]
    nodes = [helper.make_node("SplitToSequence", ins, ["seq"], axis=1, **attrs),
             helper.make_node("SequenceAt", ["seq", "last"], ["tail"]),
             helper.make_node("SequenceAt", ["seq", "zero"], ["head"]),
             helper.make_node("SequenceLength", ["seq"], ["n"])]
    same_shapes = split is None or (split.ndim == 0 and 5 % int(split) == 0)
    if same_shapes or not new_axis:
        nodes.append(helper.make_node("ConcatFromSequence", ["seq"], ["joined"], axis=-1 if new_axis else 1,
                                      new_axis=new_axis))
    outs = [n.output[0] for n in nodes[1:]]
    model = make_model(nodes, {"x": x}, outs, {**weights, "last": i64(-1).reshape(()), "zero": i64(0).reshape(())},
                       opset=13)
    check_model(model, {"x": x})


def test_constructed_sequence_edited_then_concatenated():
    a, b, c = random((2, 3)), random((2, 3), seed=1), random((2, 3), seed=2)
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s0"]),
             helper.make_node("SequenceInsert", ["s0", "c", "one"], ["s1"]),  # a, c, b
             helper.make_node("SequenceInsert", ["s1", "a"], ["s2"]),  # a, c, b, a
             helper.make_node("SequenceErase", ["s2", "zero"], ["s3"]),  # c, b, a
             helper.make_node("SequenceErase", ["s3"], ["s4"]),  # c, b
             helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.FLOAT),
             helper.make_node("SequenceInsert", ["e", "b"], ["s5"]),
             helper.make_node("ConcatFromSequence", ["s4"], ["y"], axis=0),
             helper.make_node("ConcatFromSequence", ["s5"], ["z"], axis=1, new_axis=1),
             helper.make_node("SequenceLength", ["s2"], ["n"])]
    feeds = {"a": a, "b": b, "c": c}
    check_model(make_model(nodes, feeds, ["y", "z", "n"], {"one": i64(1).reshape(()), "zero": i64(0).reshape(())},
                           opset=13), feeds)


def test_loop_appends_to_a_sequence():
    """A scripted list comprehension: each iteration inserts into a loop-carried sequence."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "i_f"], ["xi"]),
         helper.make_node("SequenceInsert", ["s_in", "xi"], ["s_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_sequence_value_info("s_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("s_out", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["s"], dtype=TensorProto.FLOAT),
             helper.make_node("Loop", ["n", "c", "s"], ["s_final"], body=body),
             helper.make_node("ConcatFromSequence", ["s_final"], ["y"], axis=0, new_axis=1)]
    x = random((2, 3))
    check_model(make_model(nodes, {"x": x}, ["y"], {"n": i64(4).reshape(()), "c": np.array(True)}, opset=13),
                {"x": x})


def test_sequences_are_refused_where_they_cannot_go():
    x = random((4, 3))
    seq = helper.make_node("SplitToSequence", ["x"], ["seq"])
    as_output = make_model([seq], {"x": x}, ["seq"], opset=13)
    with pytest.raises(ModelError, match="'seq' is a sequence"):
        import_model(as_output)
    into_relu = make_model([seq, helper.make_node("Relu", ["seq"], ["y"])], {"x": x}, ["y"], opset=13)
    with pytest.raises(UnsupportedOpError, match="sequence input"):
        import_model(into_relu)
    at_run_time = make_model([seq, helper.make_node("SequenceAt", ["seq", "k"], ["y"])],
                             {"x": x, "k": i64(1).reshape(())}, ["y"], opset=13)
    with pytest.raises(DataDependentShapeError, match="position"):
        import_model(at_run_time)
