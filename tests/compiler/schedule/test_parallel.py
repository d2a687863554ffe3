"""Which CPU kernels run on the calling thread alone (compiler/schedule/parallel.py
`runs_serially`): those with little arithmetic and little memory to move."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler import frontend
from compiler.schedule.parallel import PARALLEL_MIN_BYTES, PARALLEL_MIN_FLOPS, runs_serially


def _shuffle_transpose(channels: int, size: int):
    """The Compute of ShuffleNet's channel shuffle of `channels` on size x size: the
    transpose between its two reshapes."""
    shape = np.array([1, 2, channels // 2, size, size], np.int64)
    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["a"]),
         helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 1, 3, 4])],
        "shuffle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(shape, "s")])
    graph = frontend.import_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                                  .SerializeToString())
    (transpose,) = [n for n in graph.nodes if n.op == "Transpose"]
    return transpose.compute


def test_a_copy_of_many_bytes_shares_its_tasks_though_it_does_little_arithmetic() -> None:
    c = _shuffle_transpose(96, 14)  # 75 KB out: one op an element
    out_bytes = 4 * 96 * 14 * 14
    assert c.flops() < PARALLEL_MIN_FLOPS and out_bytes >= PARALLEL_MIN_BYTES
    assert not runs_serially(c)


def test_a_small_copy_runs_on_the_calling_thread() -> None:
    c = _shuffle_transpose(16, 7)  # 3 KB
    assert runs_serially(c)
