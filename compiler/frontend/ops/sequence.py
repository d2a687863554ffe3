"""Sequences of tensors, laid out at compile time (see values.SequenceValue).

Exporters write them for lists of tensors: torch.split / chunk / unbind become
SplitToSequence and SequenceAt, torch.stack / cat over a list ConcatFromSequence.
With static shapes every element is known, so each op is a pick, a slice or a
concatenation of Values; positions must be constants.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from compiler.frontend.dtypes import ir_dtype
from compiler.frontend.ops.movement import concat_values, split_values, stack_values
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import SequenceValue, Value


def _position(cx: OpContext, i: int, length: int, default: int | None, inserting: bool = False) -> int:
    """The constant position input `i` as an index into a sequence of `length` (negative ones
    count from the end; an insertion may also be at the end)."""
    given = cx.const_input(i, "position")
    if given is None:
        if default is None:
            raise cx.error(f"required input {i} (position) is missing")
        return default
    k = int(np.asarray(given).reshape(-1)[0])
    last = length if inserting else length - 1
    if not -length <= k <= last:
        raise cx.error(f"position {k} is out of range for a sequence of {length}")
    return k + length if k < 0 else k


def _check_type(cx: OpContext, seq_dtype: str, tensor: Value) -> None:
    if tensor.dtype != seq_dtype:
        raise cx.error(f"a {tensor.dtype} tensor in a sequence of {seq_dtype}")


@lowering("SequenceEmpty")
def sequence_empty(cx: OpContext) -> Outputs:
    return [SequenceValue((), ir_dtype(int(cx.attr("dtype", TensorProto.FLOAT)), f"{cx.op} dtype"))]


@lowering("SequenceConstruct")
def sequence_construct(cx: OpContext) -> Outputs:
    items = tuple(cx.input(k) for k in range(len(cx.inputs)))
    if not items:
        raise cx.error("no tensors to make a sequence of")
    for t in items:
        _check_type(cx, items[0].dtype, t)
    return [SequenceValue(items, items[0].dtype)]


@lowering("SequenceAt", takes_sequences=True)
def sequence_at(cx: OpContext) -> Outputs:
    seq = cx.sequence(0)
    return [seq.items[_position(cx, 1, len(seq.items), None)]]


@lowering("SequenceInsert", takes_sequences=True)
def sequence_insert(cx: OpContext) -> Outputs:
    seq, tensor = cx.sequence(0), cx.input(1)
    _check_type(cx, seq.dtype, tensor)
    k = _position(cx, 2, len(seq.items), len(seq.items), inserting=True)
    return [SequenceValue((*seq.items[:k], tensor, *seq.items[k:]), seq.dtype)]


@lowering("SequenceErase", takes_sequences=True)
def sequence_erase(cx: OpContext) -> Outputs:
    seq = cx.sequence(0)
    if not seq.items:
        raise cx.error("erasing from an empty sequence")
    k = _position(cx, 1, len(seq.items), len(seq.items) - 1)
    return [SequenceValue((*seq.items[:k], *seq.items[k + 1:]), seq.dtype)]


@lowering("SequenceLength", takes_sequences=True)
def sequence_length(cx: OpContext) -> Outputs:
    return [cx.constant(np.asarray(len(cx.sequence(0).items), np.int64))]


@lowering("SplitToSequence")
def split_to_sequence(cx: OpContext) -> Outputs:
    """Pieces of the given sizes, or of one size (the last piece takes what is left), or,
    without `split`, every element along the axis (its dim dropped unless keepdims)."""
    x = cx.input(0)
    axis = cx.axis(cx.attr("axis", 0), x.rank)
    n = x.shape[axis]
    split = cx.const_input(1, "split")
    if split is None:
        parts = split_values(cx, x, axis, [1] * n)
        if not cx.attr("keepdims", 1):
            parts = [cx.view(p, x.shape[:axis] + x.shape[axis + 1:]) for p in parts]
        return [SequenceValue(tuple(parts), x.dtype)]
    sizes = [int(s) for s in np.asarray(split).reshape(-1)]
    if np.asarray(split).ndim == 0:
        if sizes[0] <= 0:
            raise cx.error(f"split size {sizes[0]} must be positive")
        sizes = [min(sizes[0], n - start) for start in range(0, n, sizes[0])]
    return [SequenceValue(tuple(split_values(cx, x, axis, sizes)), x.dtype)]


@lowering("ConcatFromSequence", takes_sequences=True)
def concat_from_sequence(cx: OpContext) -> Outputs:
    """The elements concatenated along `axis`, or stacked along a new one (new_axis=1)."""
    seq = cx.sequence(0)
    if not seq.items:
        raise cx.error("concatenating an empty sequence")
    rank = seq.items[0].rank
    if not cx.attr("new_axis", 0):
        return [concat_values(cx, list(seq.items), cx.axis(cx.attr("axis"), rank))]
    return [stack_values(cx, seq.items, cx.axis(cx.attr("axis"), rank + 1))]
