"""Concatenations placed, not copied: where each part of a Concat is one contiguous range
of its output (every axis before the concatenation axis has extent 1: a batch-1 NCHW
concatenation of channels), the parts' producers write straight into that range and no
kernel copies them. U-Net's skip concatenations cost 4% of the model as copies (the 2 MB
one at 128 x 128: 343 us on one Zen 4 thread, onnxruntime's 123 us).

The planner (compiler/schedule/planner.py) then places the concatenation's storage in
the arena once, for the lifetime of all its parts, and each part at its byte offset
inside it; kernels that read a part read it there. A concatenation of concatenations
(the frontend's tree for many parts) nests.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from compiler.aligned import ALIGNMENT
from compiler.ir.dtypes import dtype
from compiler.ir.graph import Graph, Node, TensorKind
from compiler.ir.interp import evaluate
from compiler.ir.te import Compute

# Elements of the largest concatenation checked and placed: its inputs' running count must be
# exact in float32 (2^24), and the check runs the Compute once on the host.
MAX_CHECKED = 1 << 24


@dataclass
class PlacedConcats:
    """`inside[s]`: the storage that holds storage `s`, and `s`'s byte offset in it;
    `removed`: the ids of the Concat nodes no kernel runs."""

    inside: dict[int, tuple[int, int]] = field(default_factory=dict)
    removed: set[int] = field(default_factory=set)

    def root(self, s: int) -> tuple[int, int]:
        """The outermost storage holding `s` (itself if none), and `s`'s byte offset in it."""
        offset = 0
        while s in self.inside:
            s, delta = self.inside[s]
            offset += delta
        return s, offset


def place_concats(graph: Graph) -> PlacedConcats:
    """The Concat nodes of `graph` whose parts can be written in place (`_slices`)."""
    placed = PlacedConcats()
    written = {n.output for n in graph.nodes}
    read_whole = set(graph.outputs) | set(graph.inputs)
    fixed = {graph.storage_of(t) for t in read_whole}
    for node in graph.nodes:
        slices = _slices(graph, node, written, fixed)
        if slices is None or any(s in placed.inside for s, _ in slices):
            continue  # a storage can be in one place only
        out = graph.storage_of(node.output)
        placed.inside.update({s: (out, offset) for s, offset in slices})
        placed.removed.add(node.id)
    return placed


def placeable(graph: Graph, node: Node) -> bool:
    """Whether the parts of concatenation `node` can be written in place as `graph` stands.
    Register fusion leaves such a Concat's producers whole: inlined, a producer would make
    the Concat a kernel of its own that copies every part (the segmenter's ASPP pooling
    branch, a broadcast Expand inlined, cost a 2.6 MB copy of all five parts). Asked of
    every node register fusion visits: any other node is answered before the graph is read."""
    if not _is_concat(node):
        return False
    written = {n.output for n in graph.nodes}
    fixed = {graph.storage_of(t) for t in (*graph.outputs, *graph.inputs)}
    return _slices(graph, node, written, fixed) is not None


def _slices(graph: Graph, node: Node, written: set[int], fixed: set[int]) -> list[tuple[int, int]] | None:
    """(part storage, byte offset in the output) of each input of a concatenation `node`
    (`_is_concat`), or None where its inputs are not contiguous, aligned ranges of its
    output, each an intermediate of its own written by a node (a graph input or output, or
    a weight, stays where it is)."""
    if not _is_concat(node):
        return None
    out = graph.tensors[node.output]
    parts = [graph.tensors[t] for t in node.inputs]
    storages = [graph.storage_of(t) for t in node.inputs]
    if (graph.storage_of(node.output) in fixed or len(set(storages)) < len(storages)
            or any(p.dtype != out.dtype for p in parts) or sum(p.nbytes for p in parts) != out.nbytes):
        return None
    offsets = _ranges(node.compute, tuple(math.prod(p.shape) for p in parts))
    if offsets is None:
        return None
    slices = []
    for s, p, at in zip(storages, parts, offsets, strict=True):
        t = graph.tensors[s]
        offset = at * dtype(out.dtype).nbytes
        if (s in fixed or s not in written or t.kind != TensorKind.INTERMEDIATE or t.nbytes != p.nbytes
                or offset % ALIGNMENT):  # kernels read and write their buffers in aligned vectors
            return None
        slices.append((s, offset))
    return slices


def _is_concat(node: Node) -> bool:
    """Whether `node` is one kernel of Concat ops only (nested ones fuse into one)."""
    return set(node.op.split("+")) == {"Concat"} and not node.compute.reduce_axes


@functools.lru_cache(maxsize=64)
def _ranges(c: Compute, sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """Where each input of concatenation `c` (of `sizes` elements) starts in its output
    (elements, row-major), where the output is its inputs one after another in some order;
    None otherwise. Checked by running the Compute on inputs whose elements are all distinct
    (their running count), so that it holds for any concatenation the frontend and fusion
    produce, whatever its axis and order. Memoised: register fusion, the chains and the
    planner each ask about the same Concat, and running one of 8 million elements takes 0.6 s."""
    np_type = dtype(c.dtype).np_type
    if sum(sizes) > MAX_CHECKED or not np.issubdtype(np_type, np.number):
        return None
    first = np.cumsum([0, *sizes[:-1]])
    inputs = [(b + np.arange(n)).astype(np_type).reshape(t.shape) for b, n, t in zip(first, sizes, c.inputs, strict=True)]
    if any(not np.array_equal(x.ravel(), b + np.arange(n)) for x, b, n in zip(inputs, first, sizes, strict=True)):
        return None  # the dtype does not hold the counts exactly
    flat = np.asarray(evaluate(c, inputs)).ravel()
    starts = []
    for b, n in zip(first, sizes, strict=True):
        at = np.flatnonzero(flat == b)
        if len(at) != 1 or not np.array_equal(flat[at[0]:at[0] + n], b + np.arange(n, dtype=flat.dtype)):
            return None
        starts.append(int(at[0]))
    return tuple(starts)
