"""Specialization of shape-deciding inputs: a static-shape compiler's answer to models
that pass Reshape's shape, Slice's starts or a Reduce's axes as run-time inputs.

The model is compiled with those inputs frozen to the values of a first run;
the caller keeps one compilation per distinct set of frozen values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import numpy as np
import onnx
from onnx import ModelProto, numpy_helper

from compiler.frontend.registry import DataDependentShapeError

T = TypeVar("T")


def freeze_inputs(model: ModelProto, values: Mapping[str, np.ndarray]) -> ModelProto:
    """A copy of `model` where the named inputs are initializers holding `values`."""
    frozen = ModelProto()
    frozen.CopyFrom(model)
    frozen.graph.initializer.extend(numpy_helper.from_array(np.asarray(a), n) for n, a in values.items())
    return frozen


def element_types(model: onnx.ModelProto) -> set[int]:
    """ONNX element types of the graph's inputs and outputs and of its Cast targets."""
    g = model.graph
    types = {v.type.tensor_type.elem_type for v in (*g.input, *g.output) if v.type.HasField("tensor_type")}
    types |= {a.i for n in g.node if n.op_type == "Cast" for a in n.attribute if a.name == "to"}
    return types


def specialize(
    model: ModelProto, inputs: Mapping[str, np.ndarray], attempt: Callable[[ModelProto], T]
) -> tuple[T, dict[str, np.ndarray]]:
    """Run `attempt` on the model, freezing shape-deciding inputs until it succeeds.

    Each input a DataDependentShapeError names is frozen to its value in
    `inputs`; when the culprit is computed from inputs (not one itself), the
    integer, boolean and scalar inputs are frozen together. Returns the
    attempt's result and the frozen values.
    """
    frozen: dict[str, np.ndarray] = {}
    while True:
        try:
            return attempt(freeze_inputs(model, frozen) if frozen else model), frozen
        except DataDependentShapeError as e:
            if e.value is not None and e.value in inputs and e.value not in frozen:
                frozen[e.value] = np.asarray(inputs[e.value])
                continue
            shape_like = {n: np.asarray(a) for n, a in inputs.items()
                          if np.asarray(a).dtype.kind in "iub" or np.asarray(a).ndim == 0}
            if set(shape_like) <= set(frozen):
                raise
            frozen.update(shape_like)
