"""The lowering registry: `@lowering("Relu", ...)` maps ONNX op types to functions.

A lowering function receives an `OpContext` (the node's inputs as `Value`s,
its attributes, the model's opset and the builder) and returns the node's
outputs as a list of `Value`s (None for an output it does not produce).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from onnx import GraphProto

from compiler.errors import ModelError, UnsupportedOpError
from compiler.frontend.builder import Builder
from compiler.frontend.names import shorten, shown
from compiler.frontend.values import AnyValue, SequenceValue, Value
from compiler.ir.te import Compute

Outputs = list[AnyValue | None]
LoweringFn = Callable[["OpContext"], Outputs]

LOWERINGS: dict[str, LoweringFn] = {}
TAKES_SEQUENCES: set[str] = set()  # op types whose lowering accepts sequence inputs


class DataDependentShapeError(UnsupportedOpError):
    """An input that decides an output shape (Reshape's shape, Slice's starts...) is only
    known at run time. `value` names the model input it is, when it is one."""

    def __init__(self, op: str, node: str, why: str, value: str | None) -> None:
        super().__init__(op, node, why)
        self.value = value


def lowering(*op_types: str, takes_sequences: bool = False) -> Callable[[LoweringFn], LoweringFn]:
    """Register a function as the lowering of the given ONNX op types (`takes_sequences`:
    it handles sequence inputs; other ops are refused them before they are called)."""

    def register(fn: LoweringFn) -> LoweringFn:
        for op in op_types:
            if op in LOWERINGS:
                raise RuntimeError(f"two lowerings registered for {op}")
            LOWERINGS[op] = fn
            if takes_sequences:
                TAKES_SEQUENCES.add(op)
        return fn

    return register


class OpContext:
    """One ONNX node being lowered: its inputs, attributes, opset and the builder."""

    def __init__(
        self,
        builder: Builder,
        op: str,
        name: str,
        inputs: Sequence[AnyValue | None],
        attrs: dict[str, Any],
        num_outputs: int,
        opset: int,
        lower_graph: Callable[[GraphProto, Sequence[AnyValue]], list[AnyValue]] | None = None,
    ) -> None:
        self.builder = builder
        self.op = op
        self.name = name
        self.inputs = list(inputs)
        self.attrs = attrs
        self.num_outputs = num_outputs
        self.opset = opset
        self._lower_graph = lower_graph

    # -- inputs and attributes ------------------------------------------------

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def input(self, i: int) -> Value:
        """Input `i`, a tensor the op requires."""
        v = self.optional(i)
        if v is None:
            raise self.error(f"required input {i} is missing")
        return v

    def optional(self, i: int) -> Value | None:
        """Input `i`, a tensor, or None when omitted."""
        v = self.inputs[i] if i < len(self.inputs) else None
        if isinstance(v, SequenceValue):
            raise self.unsupported(f"input {i} is a sequence where a tensor is expected")
        return v

    def value(self, i: int) -> AnyValue:
        """Input `i`, a tensor or a sequence, which the op requires."""
        v = self.inputs[i] if i < len(self.inputs) else None
        if v is None:
            raise self.error(f"required input {i} is missing")
        return v

    def sequence(self, i: int) -> SequenceValue:
        """Input `i`, a sequence the op requires."""
        v = self.value(i)
        if not isinstance(v, SequenceValue):
            raise self.error(f"input {i} must be a sequence")
        return v

    def const_input(self, i: int, what: str) -> np.ndarray | None:
        """The compile-time value of optional input `i` (None if omitted).

        Raises UnsupportedOpError when it is only known at run time: the output
        shape would depend on input values.
        """
        v = self.optional(i)
        if v is None:
            return None
        if v.array is None:
            graph = self.builder.graph
            is_input = v.tid is not None and v.tid in graph.inputs
            raise DataDependentShapeError(shorten(self.op), shorten(self.name),
                                          f"data-dependent shape: {what} (input {i}) is not a constant",
                                          graph.tensors[v.tid].name if is_input else None)
        return v.array

    def ints_from(self, attr: str, i: int, what: str) -> list[int] | None:
        """A list of ints given either as attribute `attr` (older opsets) or as constant input `i`."""
        if attr in self.attrs:
            return [int(x) for x in np.asarray(self.attrs[attr]).reshape(-1)]
        arr = self.const_input(i, what)
        return None if arr is None else [int(x) for x in np.asarray(arr).reshape(-1)]

    def unsupported(self, why: str) -> UnsupportedOpError:
        return UnsupportedOpError(shorten(self.op), shorten(self.name), why)

    def error(self, why: str) -> ModelError:
        return ModelError(f"{self.op} node {shown(self.name)}: {why}")

    def check_steps(self, steps: int) -> None:
        """ModelError when an unrolled loop would run more steps than the limit allows."""
        if steps > self.builder.limits.max_unrolled_steps:
            raise self.error(f"{steps} steps to unroll exceed the limit of {self.builder.limits.max_unrolled_steps}")

    def axis(self, a: int, rank: int) -> int:
        """A possibly negative axis normalized to [0, rank); ModelError when out of range."""
        if not -rank <= a < max(rank, 1):
            raise self.error(f"axis {a} out of range for rank {rank}")
        return a % rank if rank else 0

    # -- building -------------------------------------------------------------

    def emit(self, compute: Compute, inputs: Sequence[Value]) -> Value:
        return self.builder.emit(compute, inputs)

    def view(self, v: Value, shape: Sequence[int]) -> Value:
        return self.builder.view(v, shape)

    def constant(self, array: np.ndarray) -> Value:
        return Value.of_array(array)

    def lower_graph(self, graph: GraphProto, inputs: Sequence[AnyValue] = ()) -> list[AnyValue]:
        """Lower a subgraph attribute (If branch, loop body) in this node's scope, its inputs bound
        to `inputs`; returns its outputs' values."""
        if self._lower_graph is None:
            raise self.unsupported("subgraphs are not available here")
        return self._lower_graph(graph, inputs)
