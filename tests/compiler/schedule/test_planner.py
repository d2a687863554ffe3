"""Graph -> ExecutionPlan: kernels, buffers, waves and the arena."""

import numpy as np
import pytest

from compiler.aligned import ALIGNMENT
from compiler.ir.graph import Graph, TensorKind
from compiler.ir.te import Axis, Compute, Load, TensorType, Var, call
from compiler.schedule.plan import BufferKind, TileConfig
from compiler.schedule.planner import build_plan, weights_blob


def elementwise(op: str, shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> Compute:
    """out = op(inputs...), each input broadcast over the trailing axes of `out`."""
    axes = tuple(Axis(f"i{d}", n) for d, n in enumerate(out))
    loads = [Load(k, tuple(Var(f"i{d + len(out) - len(s)}") for d in range(len(s))), "float32")
             for k, s in enumerate(shapes)]
    return Compute(axes=axes, body=call(op, *loads), dtype="float32",
                   inputs=tuple(TensorType(s, "float32") for s in shapes), label=op)


def tile(c: Compute, constants: tuple[int, ...] = ()) -> TileConfig:
    return TileConfig(block=c.shape, thread=tuple(1 for _ in c.shape), reduce_step=())


def diamond() -> tuple[Graph, dict[str, int]]:
    g = Graph()
    x = g.new_tensor((4, 8), "float32", TensorKind.INPUT, name="x")
    w = g.new_tensor((8,), "float32", TensorKind.WEIGHT, data=np.arange(8, dtype=np.float32))
    a = g.add_node("Add", elementwise("add", [(4, 8), (8,)], (4, 8)), (x.id, w.id))
    b = g.add_node("Exp", elementwise("exp", [(4, 8)], (4, 8)), (a.id,))
    c = g.add_node("Neg", elementwise("neg", [(4, 8)], (4, 8)), (a.id,))
    d = g.add_node("Mul", elementwise("mul", [(4, 8), (4, 8)], (4, 8)), (b.id, c.id))
    y = g.add_view(d.id, (32,))
    y.name = "y"
    g.inputs, g.outputs = [x.id], [y.id]
    return g, {"x": x.id, "w": w.id, "a": a.id, "b": b.id, "c": c.id, "d": d.id}


def test_diamond_plan_has_waves_buffers_and_args():
    g, t = diamond()
    plan = build_plan(g, "cpu:test:0", tile, keys=lambda c, _constants: c.label * 8)
    assert plan.waves == [[0], [1, 2], [3]]
    assert [k.args for k in plan.kernels] == [
        (t["a"], t["x"], t["w"]), (t["b"], t["a"]), (t["c"], t["a"]), (t["d"], t["b"], t["c"])]
    assert plan.kernels[3].ops == ("Mul",) and plan.kernels[0].key == "add" * 8
    # the weight is the Add's second input: recorded, so codegen may pack it at load
    assert [k.constant_inputs for k in plan.kernels] == [(1,), (), (), ()]
    kinds = {b: buf.kind for b, buf in plan.buffers.items()}
    assert kinds == {t["x"]: BufferKind.INPUT, t["w"]: BufferKind.WEIGHT, t["a"]: BufferKind.ARENA,
                     t["b"]: BufferKind.ARENA, t["c"]: BufferKind.ARENA, t["d"]: BufferKind.OUTPUT}
    out = plan.buffers[t["d"]]
    assert (out.name, out.shape, out.nbytes) == ("y", (32,), 128)
    assert plan.inputs == [t["x"]] and plan.outputs == [t["d"]]
    assert plan.buffers[t["x"]].name == "x"
    # a, b, c are all live in wave 1: three distinct 128-byte slots
    offs = sorted(plan.buffers[t[n]].offset for n in "abc")
    assert offs == [0, 128, 256] and plan.arena_bytes == 384
    assert plan.weights_bytes == 64
    blob = weights_blob(g, plan)
    assert np.frombuffer(blob[:32], np.float32).tolist() == list(range(8))
    assert bytes(blob[32:]) == bytes(32)  # padding is zeros: the same model, the same artifact
    assert blob.readonly and np.frombuffer(blob, np.uint8).ctypes.data % ALIGNMENT == 0


def test_chain_reuses_the_arena_and_never_aliases_a_kernel_input():
    g = Graph()
    x = g.new_tensor((256,), "float32", TensorKind.INPUT, name="x")
    cur = x
    for _ in range(5):
        cur = g.add_node("Neg", elementwise("neg", [(256,)], (256,)), (cur.id,))
    g.inputs, g.outputs = [x.id], [cur.id]
    plan = build_plan(g, "cpu:test:0", tile)
    arena = [b for b in plan.buffers.values() if b.kind == BufferKind.ARENA]
    assert len(arena) == 4 and plan.arena_bytes == 2 * 1024
    for k in plan.kernels:
        out = plan.buffers[k.args[0]]
        for i in k.args[1:]:
            if out.kind == plan.buffers[i].kind == BufferKind.ARENA:
                assert out.offset != plan.buffers[i].offset
    # default keys are cache signatures: identical Computes share one kernel symbol
    assert len({k.key for k in plan.kernels}) == 1 and len(plan.kernels[0].key) == 64


def test_a_kernel_reading_a_weight_has_its_own_key():
    """Constness is part of the signature: the same Compute on a weight may compile differently."""
    g, t = diamond()
    on_weight = build_plan(g, "cpu:test:0", tile).kernels[0]
    g.tensors[t["w"]].kind = TensorKind.INPUT
    g.inputs.append(t["w"])
    on_input = build_plan(g, "cpu:test:0", tile).kernels[0]
    assert on_weight.compute == on_input.compute and on_weight.key != on_input.key


def test_output_that_is_not_written_by_a_node_is_refused():
    g = Graph()
    x = g.new_tensor((4,), "float32", TensorKind.INPUT, name="x")
    g.inputs, g.outputs = [x.id], [x.id]
    with pytest.raises(ValueError, match="written by a node"):
        build_plan(g, "cpu:test:0", tile)
