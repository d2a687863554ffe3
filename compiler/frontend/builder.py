"""Appends lowered Computes to a Graph, folding those whose inputs are all constant.

Folding reuses lowering: a Compute whose inputs are all known is evaluated at
once by the numpy interpreter (when its index space is small enough) and
becomes a constant; otherwise it becomes a node, and the constants it reads
become weight tensors.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from compiler.errors import ModelError
from compiler.frontend.choices import Chooser, by_default
from compiler.frontend.limits import Limits
from compiler.frontend.scalars import inline_scalar_constants
from compiler.frontend.values import Value
from compiler.ir.graph import Graph, TensorKind
from compiler.ir.interp import evaluate
from compiler.ir.te import Compute, remap_loads


def work_of(c: Compute) -> int:
    """Size of a Compute's index space (outputs times reduce extent)."""
    return math.prod(c.shape) * math.prod(a.extent for a in c.reduce_axes)


def read_once(compute: Compute, tids: tuple[int, ...]) -> tuple[Compute, tuple[int, ...]]:
    """`compute` over `tids` with each tensor one input, read by every load of it.

    A node that reads one value twice (Mul(x, x), as exporters write x**2 and
    variances) then takes it once, so it is the value's only reader and
    register fusion can connect it to the value's producer.
    """
    unique = tuple(dict.fromkeys(tids))
    if len(unique) == len(tids):
        return compute, tids
    slot = [unique.index(t) for t in tids]
    post = None if compute.post is None else remap_loads(compute.post, slot)
    return dataclasses.replace(compute, body=remap_loads(compute.body, slot), post=post,
                               inputs=tuple(compute.inputs[tids.index(t)] for t in unique)), unique


class Builder:
    """The graph under construction, the limits it must respect and the node being lowered."""

    def __init__(self, limits: Limits, choose: Chooser = by_default) -> None:
        self.graph = Graph()
        self.limits = limits
        self.choose = choose  # which of an op's two lowerings to take (compiler/frontend/choices.py)
        self.op = ""
        self.node_name = ""
        self.folded_work = 0

    def check_shape(self, shape: Sequence[int], what: str) -> None:
        """ModelError when a tensor would exceed the rank or element caps."""
        if len(shape) > self.limits.max_rank:
            raise ModelError(f"{what}: rank {len(shape)} exceeds the limit of {self.limits.max_rank}")
        if any(s < 0 for s in shape):
            raise ModelError(f"{what}: negative dimension in shape {list(shape)}")
        n = math.prod(shape)
        if n > self.limits.max_tensor_elements:
            raise ModelError(
                f"{what}: {n} elements exceeds the limit of {self.limits.max_tensor_elements}"
            )

    def _where(self) -> str:
        return f"output of {self.op} node {self.node_name!r}"

    def emit(self, compute: Compute, inputs: Sequence[Value]) -> Value:
        """Add `compute` over `inputs` (labelled with the current ONNX op) and return its result."""
        self.check_shape(compute.shape, self._where())
        compute = dataclasses.replace(compute, label=self.op)
        work = work_of(compute)
        if (all(v.is_const for v in inputs) and work <= self.limits.max_fold_work
                and self.folded_work + work <= self.limits.max_fold_total):
            self.folded_work += work
            return Value.of_array(evaluate(compute, [v.array for v in inputs]))  # type: ignore[misc]
        if len(self.graph.nodes) >= self.limits.max_kernels:
            raise ModelError(f"the lowered model exceeds {self.limits.max_kernels} kernels")
        compute, inputs = inline_scalar_constants(compute, inputs)
        compute, tids = read_once(compute, tuple(self.tensor_of(v) for v in inputs))
        t = self.graph.add_node(self.op, compute, tids, name=self.node_name)
        return Value(t.shape, t.dtype, tid=t.id)

    def view(self, v: Value, shape: Sequence[int]) -> Value:
        """`v` reinterpreted with a new shape of the same size (no kernel)."""
        shape = tuple(int(s) for s in shape)
        self.check_shape(shape, self._where())
        if math.prod(shape) != math.prod(v.shape):
            raise ModelError(f"{self._where()}: cannot view {list(v.shape)} as {list(shape)}")
        if shape == v.shape:
            return v
        if v.array is not None:
            return Value.of_array(v.array.reshape(shape))
        assert v.tid is not None
        t = self.graph.add_view(v.tid, shape)
        return Value(t.shape, t.dtype, tid=t.id)

    def tensor_of(self, v: Value) -> int:
        """The graph tensor holding `v`; a constant becomes a weight tensor (once)."""
        if v.tid is None:
            assert v.array is not None
            t = self.graph.new_tensor(v.shape, v.dtype, TensorKind.WEIGHT, name=v.name,
                                      data=np.require(v.array, requirements='C'))
            v.tid = t.id
        return v.tid
