"""The operator graph: tensors and the Computes that produce them.

Tensors have generated integer ids; the user's names are kept only as
metadata (for the manifest and error messages), never used as identifiers.
Reshape-like operators are views: a tensor whose storage is another tensor's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute


class TensorKind(StrEnum):
    INPUT = "input"
    WEIGHT = "weight"
    INTERMEDIATE = "intermediate"


@dataclass
class Tensor:
    """A value in the graph. `data` is set for weights (constants)."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    kind: TensorKind
    name: str = ""
    data: np.ndarray | None = None
    view_of: int | None = None  # id of the tensor whose storage this one reinterprets

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * dtype(self.dtype).nbytes


@dataclass
class Node:
    """One Compute; `inputs[i]` is the tensor read as the Compute's input i."""

    id: int
    op: str
    compute: Compute
    inputs: tuple[int, ...]
    output: int
    name: str = ""  # the ONNX node name, metadata only


@dataclass
class Graph:
    """Tensors, nodes in topological order, and the graph's inputs and outputs."""

    tensors: dict[int, Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    _next: int = 0

    def new_tensor(
        self,
        shape: tuple[int, ...],
        dt: str,
        kind: TensorKind = TensorKind.INTERMEDIATE,
        name: str = "",
        data: np.ndarray | None = None,
        view_of: int | None = None,
    ) -> Tensor:
        t = Tensor(self._next, tuple(int(s) for s in shape), dt, kind, name, data, view_of)
        self.tensors[t.id] = t
        self._next += 1
        return t

    def add_node(self, op: str, compute: Compute, inputs: tuple[int, ...], name: str = "") -> Tensor:
        """Append a node computing a new intermediate tensor; returns that tensor."""
        for i, (tid, tt) in enumerate(zip(inputs, compute.inputs, strict=True)):
            t = self.tensors[tid]
            if t.shape != tt.shape or t.dtype != tt.dtype:
                raise ValueError(
                    f"{op}: input {i} is {t.dtype}{list(t.shape)}, compute expects {tt.dtype}{list(tt.shape)}"
                )
        out = self.new_tensor(compute.shape, compute.dtype)
        self.nodes.append(Node(len(self.nodes), op, compute, tuple(inputs), out.id, name))
        return out

    def add_view(self, base: int, shape: tuple[int, ...]) -> Tensor:
        """A tensor that reinterprets `base`'s storage with a new shape (same element count)."""
        b = self.tensors[base]
        if math.prod(shape) != math.prod(b.shape):
            raise ValueError(f"view {list(shape)} does not match {list(b.shape)} in size")
        root = self.storage_of(base)
        kind = self.tensors[root].kind
        data = None
        if kind == TensorKind.WEIGHT:
            data = np.asarray(self.tensors[root].data).reshape(shape)
            return self.new_tensor(shape, b.dtype, TensorKind.WEIGHT, data=data)
        return self.new_tensor(shape, b.dtype, kind if kind == TensorKind.INPUT else TensorKind.INTERMEDIATE,
                               view_of=root)

    def storage_of(self, tid: int) -> int:
        """The tensor that owns `tid`'s memory (itself unless it is a view)."""
        t = self.tensors[tid]
        while t.view_of is not None:
            t = self.tensors[t.view_of]
        return t.id

    def producer(self) -> dict[int, Node]:
        """tensor id -> the node that writes it."""
        return {n.output: n for n in self.nodes}

    def consumers(self) -> dict[int, list[Node]]:
        """storage tensor id -> nodes that read it (through any view)."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for t in n.inputs:
                out.setdefault(self.storage_of(t), []).append(n)
        return out

    def weights(self) -> Iterator[Tensor]:
        for t in self.tensors.values():
            if t.kind == TensorKind.WEIGHT and t.view_of is None:
                yield t
