"""Running a whole Graph with the TE interpreter: the reference meaning of a lowered model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from compiler.ir.dtypes import dtype
from compiler.ir.graph import Graph, TensorKind
from compiler.ir.interp import evaluate
from compiler.ir.te import Compute

NodeRunner = Callable[[Compute, Sequence[np.ndarray]], np.ndarray]


def run_graph(graph: Graph, inputs: Mapping[str, np.ndarray],
              run: NodeRunner = evaluate) -> dict[str, np.ndarray]:
    """Evaluate every node in order (with `run`: the interpreter unless a test runs some
    nodes' kernels instead); inputs and outputs are keyed by their tensor names.

    A view reads its storage tensor reshaped; weights read their data.
    """
    storage: dict[int, np.ndarray] = {}
    for tid in graph.inputs:
        t = graph.tensors[tid]
        if t.name not in inputs:
            raise KeyError(f"missing input {t.name!r}")
        x = np.asarray(inputs[t.name])
        if tuple(x.shape) != t.shape:
            raise ValueError(f"input {t.name!r}: shape {list(x.shape)} != expected {list(t.shape)}")
        storage[tid] = x.astype(dtype(t.dtype).np_type, copy=False)
    for t in graph.tensors.values():
        if t.kind == TensorKind.WEIGHT and t.data is not None:
            storage[t.id] = np.asarray(t.data)

    def value(tid: int) -> np.ndarray:
        t = graph.tensors[tid]
        return storage[graph.storage_of(tid)].reshape(t.shape)

    for n in graph.nodes:
        storage[n.output] = run(n.compute, [value(i) for i in n.inputs])
    return {graph.tensors[t].name: value(t) for t in graph.outputs}
