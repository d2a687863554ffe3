"""What an ONNX value name stands for while lowering: a graph tensor or a known constant."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.ir.dtypes import from_numpy


@dataclass(eq=False)
class Value:
    """A lowered ONNX value with a static shape.

    Exactly one of `tid` (a tensor in the Graph) and `array` (a constant known
    at compile time) is set when the value is created; a constant that a kernel
    reads gets a weight tensor in `tid` as well, created once (see Builder).
    """

    shape: tuple[int, ...]
    dtype: str
    tid: int | None = None
    array: np.ndarray | None = None
    name: str = ""

    @property
    def is_const(self) -> bool:
        return self.array is not None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @staticmethod
    def of_array(array: np.ndarray, name: str = "") -> Value:
        """A constant value (the array is kept as given, made contiguous)."""
        a = np.require(array, requirements='C')
        return Value(tuple(int(s) for s in a.shape), from_numpy(a.dtype), array=a, name=name)


@dataclass(frozen=True, eq=False)
class SequenceValue:
    """An ONNX sequence of tensors, every element known while lowering.

    Shapes are static, so a sequence is laid out at compile time: a list of
    Values, on which SplitToSequence, SequenceAt or ConcatFromSequence are
    slices, picks and concatenations. `dtype` is the element type (an empty
    sequence has one too).
    """

    items: tuple[Value, ...]
    dtype: str


AnyValue = Value | SequenceValue  # what an ONNX value name stands for
