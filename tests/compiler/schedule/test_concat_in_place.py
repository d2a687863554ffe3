"""Concatenations placed, not copied: the parts' producers write into the concatenation's
storage, no kernel copies them, and the results match onnxruntime."""

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import import_model
from compiler.pipeline import compile_model
from compiler.runtime import load
from compiler.schedule.concat_in_place import place_concats
from compiler.schedule.plan import BufferKind, TileConfig
from compiler.schedule.planner import build_plan
from compiler.schedule.tilegraph.registers import fuse


def _tile(c, constants=()) -> TileConfig:
    return TileConfig(block=c.shape, thread=tuple(1 for _ in c.shape), reduce_step=())


def skip_model(batch: int = 1, channels: tuple[int, int, int] = (16, 16, 32), fan_in: int = 2) -> bytes:
    """Three 1x1 convolutions of x; `a` and `b` concatenated on channels, then with `c` (a
    concatenation of a concatenation when `fan_in` is 2, one of three parts otherwise), a
    1x1 convolution and a global pool of the whole; each part is also read on its own
    (skip connections: a part, or a whole, read by one node only is fused into it instead)."""
    rng = np.random.default_rng(0)
    ca, cb, cc = channels
    weights = {name: numpy_helper.from_array(rng.standard_normal((n, 8, 1, 1)).astype(np.float32), name)
               for name, n in (("wa", ca), ("wb", cb), ("wc", cc))}
    weights["wy"] = numpy_helper.from_array(rng.standard_normal((4, ca + cb + cc, 1, 1)).astype(np.float32), "wy")
    nodes = [helper.make_node("Conv", ["x", f"w{p}"], [p]) for p in "abc"]
    if fan_in == 2:
        nodes += [helper.make_node("Concat", ["a", "b"], ["ab"], axis=1),
                  helper.make_node("Concat", ["ab", "c"], ["abc"], axis=1)]
    else:
        nodes.append(helper.make_node("Concat", ["a", "b", "c"], ["abc"], axis=1))
    nodes += [helper.make_node("Conv", ["abc", "wy"], ["y"]), helper.make_node("Sigmoid", ["a"], ["z"]),
              helper.make_node("ReduceMax", ["b"], ["mb"], keepdims=0), helper.make_node("ReduceMax", ["c"], ["mc"], keepdims=0),
              helper.make_node("Add", ["mb", "mc"], ["m"]), helper.make_node("GlobalAveragePool", ["abc"], ["p"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 6, 6]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, ca, 6, 6]),
                           helper.make_tensor_value_info("m", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("p", TensorProto.FLOAT, [batch, ca + cb + cc, 1, 1])],
                          list(weights.values()))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_parts_are_placed_inside_the_concatenation_and_no_kernel_copies_them():
    graph = import_model(skip_model())
    placed = place_concats(graph)
    assert len(placed.removed) == 2  # the inner concatenation and the outer one
    plan = build_plan(graph, "cpu:test:0", _tile)
    assert not [k for k in plan.kernels if "Concat" in k.ops]
    by_op = {k.ops: k for k in plan.kernels}
    convs = [k for k in plan.kernels if k.ops == ("Conv",)]
    a, b, c = (plan.buffers[k.args[0]] for k in convs[:3])
    y = plan.buffers[convs[3].args[1]]
    assert all(p.kind == BufferKind.ARENA for p in (a, b, c, y))
    # each part at its channels' byte offset in the concatenation, in order
    assert (a.offset, b.offset, c.offset) == (y.offset, y.offset + a.nbytes, y.offset + a.nbytes + b.nbytes)
    assert a.nbytes + b.nbytes + c.nbytes == y.nbytes
    # nothing else shares those bytes while any part or the whole is live
    others = [buf for s, buf in plan.buffers.items() if buf.kind == BufferKind.ARENA
              and s not in placed.inside and s != y.id]
    assert all(o.offset + o.nbytes <= y.offset or o.offset >= y.offset + y.nbytes for o in others)
    # the consumer of the whole runs after every part's producer
    wave = {k: w for w, ks in enumerate(plan.waves) for k in ks}
    assert all(wave[k.id] < wave[convs[3].id] for k in convs[:3])
    assert by_op[("Sigmoid",)].args[1] == a.id


@pytest.mark.parametrize(("batch", "channels", "fan_in", "placed"), [
    (1, (16, 16, 32), 2, True),
    (1, (16, 16, 32), 3, True),
    (2, (16, 16, 32), 2, False),  # batch 2: a part is two ranges of the whole
    (1, (3, 16, 32), 2, False),  # 3 x 36 floats: `b` would start off a 64-byte boundary
])
def test_placed_or_not_the_results_match_onnxruntime(batch, channels, fan_in, placed, tmp_path: Path):
    data = skip_model(batch, channels, fan_in)
    r = compile_model(data, "cpu", {"measure": False}, output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation
    assert placed == (not any("Concat" in k["op_pattern"] for k in r.kernels))
    x = np.random.default_rng(1).standard_normal((batch, 8, 6, 6)).astype(np.float32)
    ours = load(r.artifact_path).run({"x": x})
    ref = dict(zip(["y", "z", "m", "p"], ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x}),
                   strict=True))
    for name in ("y", "z", "m", "p"):
        np.testing.assert_allclose(ours[name], ref[name], rtol=1e-4, atol=1e-4)


def test_a_graph_output_or_input_is_never_placed_inside_a_concatenation():
    """A part the user reads (an output), or one the user hands in (an input), stays where it is."""
    node = helper.make_node("Concat", ["x", "r"], ["y"], axis=1)
    relu = helper.make_node("Relu", ["x"], ["r"])
    g = helper.make_graph([relu, node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 4, 4]),
                           helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 16, 4, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    assert not place_concats(import_model(m.SerializeToString())).removed


def pooled_branch_model() -> bytes:
    """DeepLab's ASPP tail: two 1x1 convolution branches of x and a pooled branch (global
    mean, 1x1 convolution, Relu) broadcast back over the map by an Expand, concatenated
    on channels and read by a 1x1 convolution."""
    rng = np.random.default_rng(0)
    w = {name: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
         for name, shape in (("wa", (16, 8, 1, 1)), ("wb", (16, 8, 1, 1)), ("wp", (16, 8, 1, 1)),
                             ("wy", (4, 48, 1, 1)))}
    w["axes"] = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
    w["shape"] = numpy_helper.from_array(np.array([1, 16, 6, 6], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"]), helper.make_node("Conv", ["x", "wb"], ["b"]),
             helper.make_node("ReduceMean", ["x", "axes"], ["mean"], keepdims=1),
             helper.make_node("Conv", ["mean", "wp"], ["pc"]), helper.make_node("Relu", ["pc"], ["pr"]),
             helper.make_node("Expand", ["pr", "shape"], ["e"]),
             helper.make_node("Concat", ["a", "b", "e"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "wy"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], list(w.values()))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m.SerializeToString()


def test_a_broadcast_part_is_written_in_place_not_inlined_into_a_copying_concatenation(tmp_path: Path):
    """Register fusion leaves the Expand whole: inlined, it would make the Concat a kernel
    that copies every part; left whole, it writes its part in place and nothing copies."""
    data = pooled_branch_model()
    graph = fuse(import_model(data))
    ops = [n.op for n in graph.nodes]
    assert "Expand" in ops and "Concat" in ops, ops
    concat = next(n for n in graph.nodes if n.op == "Concat")
    assert place_concats(graph).removed == {concat.id}
    r = compile_model(data, "cpu", {"measure": False}, output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(load(r.artifact_path).run({"x": x})["y"], ref, rtol=1e-4, atol=1e-4)
