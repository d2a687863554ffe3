"""Binding the model's inputs to static shapes (symbolic dims from `input_shapes`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from onnx import GraphProto

from compiler.errors import ModelError
from compiler.frontend.dtypes import ir_dtype
from compiler.frontend.names import shown


@dataclass(frozen=True)
class BoundInput:
    """A runtime input of the model with its static shape."""

    name: str
    shape: tuple[int, ...]
    dtype: str


def _declared_dims(vi) -> list[int | str | None] | None:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]


def bind_inputs(graph: GraphProto, input_shapes: Mapping[str, Sequence[int]]) -> list[BoundInput]:
    """Static shapes of the graph's runtime inputs (initializers are weights, not inputs).

    A symbolic dim takes its size from `input_shapes` (the input's full shape)
    or, failing that, from another input where the same dim name was bound.
    """
    weights = {t.name for t in graph.initializer}
    runtime = [i for i in graph.input if i.name not in weights]
    names = {i.name for i in runtime}
    for name in input_shapes:
        if name not in names:
            raise ModelError(f"input_shapes names {shown(name)}, which is not an input of the model")
    symbols: dict[str, int] = {}

    def bind_given(vi, given: Sequence[int]) -> tuple[int, ...]:
        declared = _declared_dims(vi)
        given = [int(g) for g in given]
        if any(g < 0 for g in given):
            raise ModelError(f"input {shown(vi.name)}: input_shapes gives negative dims {given}")
        if declared is None:
            return tuple(given)
        if len(declared) != len(given):
            raise ModelError(f"input {shown(vi.name)} has rank {len(declared)}, "
                             f"input_shapes gives {given}")
        for d, (want, got) in enumerate(zip(declared, given, strict=True)):
            if isinstance(want, int) and want != got:
                raise ModelError(f"input {shown(vi.name)}: dim {d} is {want}, input_shapes gives {got}")
            if isinstance(want, str) and symbols.setdefault(want, got) != got:
                raise ModelError(f"symbolic dim {shown(want)} is bound to both "
                                 f"{symbols[want]} and {got}")
        return tuple(given)

    def bind_declared(vi) -> tuple[int, ...]:
        declared = _declared_dims(vi)
        if declared is None:
            raise ModelError(f"input {shown(vi.name)} has no declared shape; give it in input_shapes")
        out = []
        for d, dim in enumerate(declared):
            if isinstance(dim, int):
                out.append(dim)
            elif dim is not None and dim in symbols:
                out.append(symbols[dim])
            else:
                label = shown(dim) if dim is not None else "(unnamed)"
                raise ModelError(f"input {shown(vi.name)}: dim {d} {label} is symbolic; "
                                 "give its size in input_shapes")
        return tuple(out)

    shapes = {vi.name: bind_given(vi, input_shapes[vi.name]) for vi in runtime if vi.name in input_shapes}
    for vi in runtime:
        if vi.name not in shapes:
            shapes[vi.name] = bind_declared(vi)
    out = []
    for vi in runtime:
        if not vi.type.HasField("tensor_type"):
            raise ModelError(f"input {shown(vi.name)} is not a tensor (sequences and maps are not supported)")
        out.append(BoundInput(vi.name, shapes[vi.name], ir_dtype(vi.type.tensor_type.elem_type,
                                                                 f"input {shown(vi.name)}")))
    return out
