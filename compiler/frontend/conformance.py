"""The ONNX node test suite as a conformance check of the frontend (and, later, the backend).

`node_cases()` yields every node test that ships with the installed onnx
package (the stored test data when the wheel has it, else the cases generated
by onnx's own test generators). `candidates()` keeps those whose operators
are all in SUPPORTED_OPS and whose element types the IR has (no string,
bfloat16, float8, int4...); `KNOWN_GAPS` lists, with a reason, the candidates
we do not pass on purpose. Anything else that fails is a bug.

To run a case through another backend: `graph, inputs, _ = bind_case(case.model,
inputs)` and compare with `check_case`.
"""

from __future__ import annotations

import functools
import glob
import io
import os
import warnings
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import ModelProto, numpy_helper

from compiler.frontend.dtypes import IR_ELEMENT_TYPES
from compiler.frontend.importer import import_model
from compiler.frontend.loader import DEFAULT_DOMAINS
from compiler.frontend.ops import SUPPORTED_OPS
from compiler.frontend.specialize import element_types, specialize
from compiler.ir.graph import Graph


@dataclass(frozen=True)
class NodeCase:
    """One node test: a model and its (inputs, expected outputs) data sets."""

    name: str
    model: ModelProto
    data_sets: tuple[tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]], ...]
    rtol: float = 1e-3
    atol: float = 1e-7


_TRAINING = "training-mode semantics (random dropout, batch statistics) are out of scope for inference"
_OPSET_1 = "opset 1 model; opsets below 7 are refused"
_ROUNDOFF = ("the expected output holds float32 round-off (1.9e-7) where the exact value is 0; the direct "
             "sum gives ~3e-15, which atol 1e-7 rejects")

# test name -> why we do not pass it. Explicit: a candidate not listed here must pass,
# and a listed one that starts passing must be removed (the conformance test checks both).
KNOWN_GAPS: dict[str, str] = {
    "test_batchnorm_example_training_mode": _TRAINING,
    "test_batchnorm_epsilon_training_mode": _TRAINING,
    "test_training_dropout": _TRAINING,
    "test_training_dropout_default": _TRAINING,
    "test_training_dropout_default_mask": _TRAINING,
    "test_training_dropout_mask": _TRAINING,
    "test_not_2d": _OPSET_1,
    "test_not_3d": _OPSET_1,
    "test_not_4d": _OPSET_1,
    "test_scan_sum": "Scan of opset 8 (batched, with sequence_lens); Scan is supported from opset 9",
    "test_dft_inverse": _ROUNDOFF,
    "test_dft_inverse_opset19": _ROUNDOFF,
}


def _array(value: object) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)


def _stored_cases(root: str) -> list[NodeCase]:
    out = []
    for model_path in sorted(glob.glob(os.path.join(root, "*", "model.onnx"))):
        folder = os.path.dirname(model_path)
        sets = []
        for ds in sorted(glob.glob(os.path.join(folder, "test_data_set_*"))):
            def read(prefix: str, ds: str = ds) -> tuple[np.ndarray, ...]:
                files = sorted(glob.glob(os.path.join(ds, f"{prefix}_*.pb")),
                               key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
                return tuple(numpy_helper.to_array(onnx.load_tensor(f)) for f in files)
            sets.append((read("input"), read("output")))
        out.append(NodeCase(os.path.basename(folder), onnx.load(model_path), tuple(sets)))
    return out


def _tensors_only(model: ModelProto) -> bool:
    g = model.graph
    return all(v.type.HasField("tensor_type") for v in (*g.input, *g.output))


def _generated_cases() -> list[NodeCase]:
    # imported here: onnx's test generators are only needed when the suite is asked for
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)
    return [
        NodeCase(c.name, c.model, tuple((tuple(_array(x) for x in ins), tuple(_array(y) for y in outs))
                                        for ins, outs in c.data_sets), c.rtol, c.atol)
        for c in cases if c.model is not None and c.data_sets and _tensors_only(c.model)
    ]


@functools.cache
def node_cases() -> tuple[NodeCase, ...]:
    """Every node test of the installed onnx package."""
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    stored = _stored_cases(root) if os.path.isdir(root) else []
    return tuple(stored or _generated_cases())


def ops_of(model: ModelProto) -> set[str]:
    """The op types of a model's nodes (foreign domains prefixed by their domain)."""
    return {n.op_type if n.domain in DEFAULT_DOMAINS else f"{n.domain}:{n.op_type}" for n in model.graph.node}


def candidates() -> list[NodeCase]:
    """The node tests whose operators all have lowerings and whose element types the IR has."""
    return [c for c in node_cases()
            if ops_of(c.model) <= SUPPORTED_OPS and element_types(c.model) <= IR_ELEMENT_TYPES]


def bind_case(model: ModelProto, inputs: dict[str, np.ndarray]) -> tuple[Graph, dict[str, np.ndarray], bool]:
    """Import a node test model; returns (graph, run-time inputs, whether inputs were frozen).

    Node tests often pass shape-deciding tensors (Reshape's shape, Slice's
    starts, Resize's scales) as graph inputs; those are frozen to the test's
    values (see `specialize`).
    """
    graph, frozen = specialize(model, inputs, import_model)
    return graph, {n: a for n, a in inputs.items() if n not in frozen}, bool(frozen)


def check_case(case: NodeCase, run: Callable[[ModelProto, dict[str, np.ndarray]], dict[str, np.ndarray]]) -> None:
    """Run each data set through `run(model, inputs) -> outputs` and compare like onnx's runner.

    `inputs` holds every graph input of the test by name.
    """
    g = case.model.graph
    in_names = [i.name for i in g.input]
    out_names = [o.name for o in g.output]
    for inputs, expected in case.data_sets:
        got = run(case.model, dict(zip(in_names, inputs, strict=True)))
        for name, ref in zip(out_names, expected, strict=True):
            out = got[name]
            np.testing.assert_array_equal(out.shape, ref.shape, err_msg=f"output {name!r} shape")
            np.testing.assert_equal(out.dtype, ref.dtype)
            np.testing.assert_allclose(out, ref, rtol=case.rtol, atol=case.atol, err_msg=f"output {name!r}")
