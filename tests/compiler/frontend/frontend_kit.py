"""Helpers for the frontend tests: one-node ONNX models built in code, and a check of
run_graph(import_model(model)) against onnxruntime on seeded random inputs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort
from bounds_kit import assert_loads_in_bounds
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import import_model
from compiler.frontend.choices import Chooser, by_default
from compiler.ir.graph_interp import run_graph

NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
              np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL,
              np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.uint8): TensorProto.UINT8,
              np.dtype(np.int8): TensorProto.INT8, np.dtype(np.float16): TensorProto.FLOAT16}


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: Sequence[str],
    weights: dict[str, np.ndarray] | None = None,
    opset: int = 18,
) -> onnx.ModelProto:
    """A model over example `inputs` (their shapes and dtypes); output types come from ONNX shape inference."""
    graph = helper.make_graph(
        list(nodes), "test",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], list(a.shape)) for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (weights or {}).items()],
    )
    # IR version 10 is what the installed onnxruntime reads (onnx's default can be newer)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except onnx.shape_inference.InferenceError:
        return model  # a deliberately broken model: left as built
    for o in inferred.graph.output:  # an op onnx cannot infer: assume the first input's type
        if not o.type.HasField("tensor_type"):
            o.type.tensor_type.elem_type = NP_TO_ONNX[next(iter(inputs.values())).dtype]
    return inferred


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds), strict=True))


def assert_matches(got: np.ndarray, want: np.ndarray, rel_l2: float = 1e-5) -> None:
    """Same shape and dtype; floats within a relative L2 error, everything else exact."""
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        err = np.linalg.norm((got[ok] - want[ok]).astype(np.float64))
        scale = max(np.linalg.norm(want[ok].astype(np.float64)), 1e-30)
        assert err / scale <= rel_l2, f"relative L2 error {err / scale:.3g}"
    else:
        np.testing.assert_array_equal(got, want)


def check_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray], rel_l2: float = 1e-5,
                choose: Chooser = by_default) -> None:
    """run_graph(import_model(model)) equals onnxruntime on `feeds`; no load can leave its tensor.
    `choose` answers the lowering choices (compiler/frontend/choices.py)."""
    want = run_ort(model, feeds)
    graph = import_model(model.SerializeToString(), choose=choose)
    assert_loads_in_bounds(graph)
    got = run_graph(graph, feeds)
    assert set(got) == set(want)
    for name, w in want.items():
        assert_matches(got[name], w, rel_l2)


def random(shape: Sequence[int], dtype=np.float32, seed: int = 0, low: float = -3, high: float = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)


def check_op(op: str, inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray] | None = None,
             outputs: int = 1, opset: int = 18, rel_l2: float = 1e-5, input_order: Sequence[str] | None = None,
             choose: Chooser = by_default, **attrs) -> None:
    """One `op` node vs onnxruntime. Inputs named in `weights` are initializers, the rest model inputs;
    `input_order` lists the node's input names when they are not inputs-then-weights ("" = omitted)."""
    weights = weights or {}
    names = list(input_order) if input_order is not None else [*inputs, *weights]
    out = [f"y{k}" for k in range(outputs)]
    node = helper.make_node(op, names, out, **attrs)
    check_model(make_model([node], inputs, out, weights, opset), inputs, rel_l2, choose)
