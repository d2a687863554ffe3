"""A small model built by hand (shared by the runtime tests) end to end: Graph -> plan -> entry point + hand-written C
kernels -> model.so -> artifact, and the ONNX model it stands for (the reference).

    h = x @ W;  y = relu(h + b);  z = reshape(exp(h), [8])
"""


import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.build.gcc import c_flags, link_shared
from compiler.codegen.c.entry import render_entry
from compiler.ir.graph import Graph, TensorKind
from compiler.ir.te import Axis, Compute, Load, TensorType, Var, call
from compiler.schedule.plan import ExecutionPlan, TileConfig
from compiler.schedule.planner import weights_blob

RNG = np.random.default_rng(3)
W = RNG.standard_normal((8, 4)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
X_NAME, Y_NAME, Z_NAME = "x", "y:relu", "z/exp"

# One hand-written kernel per Compute label; SYMBOL is replaced by the generated name.
# The entry point calls each kernel's team function (compiler/codegen/c/team.py).
KERNELS = {
    "MatMul": """
void SYMBOL_team(float* restrict out, const float* restrict a, const float* restrict w) {
  #pragma omp for nowait
  for (long i = 0; i < 2; ++i)
    for (long j = 0; j < 4; ++j) {
      float s = 0.0f;
      for (long k = 0; k < 8; ++k) s += a[i * 8 + k] * w[k * 4 + j];
      out[i * 4 + j] = s;
    }
}
""",
    "Add+Relu": """
void SYMBOL_team(float* restrict out, const float* restrict h, const float* restrict b) {
  #pragma omp single nowait
  for (long i = 0; i < 8; ++i) { float v = h[i] + b[i % 4]; out[i] = v > 0.0f ? v : 0.0f; }
}
""",
    "Exp": """
#include <math.h>
void SYMBOL_team(float* restrict out, const float* restrict h) {
  #pragma omp single nowait
  for (long i = 0; i < 8; ++i) out[i] = expf(h[i]);
}
""",
}


def reference(x: np.ndarray) -> dict[str, np.ndarray]:
    h = x @ W
    return {Y_NAME: np.maximum(h + B, 0), Z_NAME: np.exp(h).reshape(8)}


def graph() -> Graph:
    g = Graph()
    i, j, k = Var("i0"), Var("i1"), Var("r0")
    x = g.new_tensor((2, 8), "float32", TensorKind.INPUT, name=X_NAME)
    w = g.new_tensor((8, 4), "float32", TensorKind.WEIGHT, data=W)
    b = g.new_tensor((4,), "float32", TensorKind.WEIGHT, data=B)
    axes = (Axis("i0", 2), Axis("i1", 4))
    mm = Compute(axes=axes, body=Load(0, (i, k), "float32") * Load(1, (k, j), "float32"),
                 inputs=(TensorType((2, 8), "float32"), TensorType((8, 4), "float32")),
                 dtype="float32", reduce_axes=(Axis("r0", 8),), reduce_op="sum", label="MatMul")
    h = g.add_node("MatMul", mm, (x.id, w.id))
    two_by_four = TensorType((2, 4), "float32")
    add_relu = Compute(axes=axes, body=call("max", Load(0, (i, j), "float32") + Load(1, (j,), "float32"), 0.0),
                       inputs=(two_by_four, TensorType((4,), "float32")), dtype="float32", label="Add+Relu")
    y = g.add_node("Add+Relu", add_relu, (h.id, b.id))
    y.name = Y_NAME
    exp = Compute(axes=axes, body=call("exp", Load(0, (i, j), "float32")), inputs=(two_by_four,),
                  dtype="float32", label="Exp")
    e = g.add_node("Exp", exp, (h.id,))
    z = g.add_view(e.id, (8,))
    z.name = Z_NAME
    g.inputs, g.outputs = [x.id], [y.id, z.id]
    return g


def onnx_model() -> onnx.ModelProto:
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("MatMul", [X_NAME, "W"], ["h"]),
        helper.make_node("Add", ["h", "B"], ["hb"]),
        helper.make_node("Relu", ["hb"], [Y_NAME]),
        helper.make_node("Exp", ["h"], ["e"]),
        helper.make_node("Reshape", ["e", "shape"], [Z_NAME]),
    ]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B"),
             numpy_helper.from_array(np.array([8], np.int64), "shape")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(X_NAME, f, [2, 8])],
                          [helper.make_tensor_value_info(Y_NAME, f, [2, 4]),
                           helper.make_tensor_value_info(Z_NAME, f, [8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def whole(c: Compute, constants: tuple[int, ...] = ()) -> TileConfig:
    return TileConfig(block=c.shape, thread=tuple(1 for _ in c.shape), reduce_step=(8,) if c.reduce_axes else ())


def artifact_files(g: Graph, plan: ExecutionPlan) -> dict[str, bytes]:
    sources = {k.symbol: KERNELS[k.compute.label].replace("SYMBOL", k.symbol) for k in plan.kernels}
    entry = render_entry(plan)
    binary = link_shared([], {"entry": entry, **sources}, c_flags())
    files = {f"src/{name}.c": src.encode() for name, src in sources.items()}
    files["src/entry.c"] = entry.encode()
    files["model.so"] = binary
    files["weights.bin"] = weights_blob(g, plan)
    return files


EXTRA = {"target": "cpu", "target_kind": "cpu", "toolchain": "gcc test", "model_sha256": "0" * 64}
