"""`inspect_model`: the cheap refusals plus a summary of the model, without lowering it."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import onnx
from onnx import ModelProto, NodeProto

from compiler.frontend.dtypes import dtype_name
from compiler.frontend.limits import Limits
from compiler.frontend.loader import (
    ModelSource,
    check_ops,
    check_payloads,
    check_value_infos,
    check_with_onnx,
    default_opset,
    model_payload,
    parse_payload,
    topological_order,
)
from compiler.frontend.ops import SUPPORTED_OPS


@dataclass
class ModelInfo:
    """What the service shows about an uploaded model."""

    inputs: list[dict] = field(default_factory=list)
    outputs: list[dict] = field(default_factory=list)
    op_histogram: dict[str, int] = field(default_factory=dict)
    parameters: int = 0
    opset: int = 0
    ir_version: int = 0
    producer: str = ""


@dataclass
class Screened:
    """A model that passed every cheap refusal: its opset and nodes in dependency order."""

    model: ModelProto  # with inferred value shapes; large initializers without their data
    opset: int
    nodes: list[NodeProto]


def read_and_screen(model: ModelSource, limits: Limits) -> tuple[ModelProto, Screened]:
    """Read a model (bytes, a path or a ModelProto) and screen it."""
    payload = model_payload(model, limits)
    proto = parse_payload(payload)
    return proto, screen(proto, limits, payload if isinstance(payload, bytes) else None)


def screen(model: ModelProto, limits: Limits, serialized: bytes | None = None) -> Screened:
    """Run every refusal that needs no lowering, cheapest first; `serialized` is the bytes
    `model` was parsed from, where the caller has them (onnx's checker reads them)."""
    opset = default_opset(model)
    check_ops(model, SUPPORTED_OPS, limits)
    check_payloads(model, limits)
    nodes = topological_order(model)
    check_value_infos(model, limits)
    inferred = check_with_onnx(model, serialized)
    check_value_infos(inferred, limits)
    return Screened(inferred, opset, nodes)


def _describe(vi: onnx.ValueInfoProto) -> dict:
    tt = vi.type.tensor_type
    shape: list[int | str] | None = None
    if tt.HasField("shape"):
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return {"name": vi.name, "shape": shape, "dtype": dtype_name(tt.elem_type)}


def inspect_model(model: ModelSource, limits: Limits | None = None) -> ModelInfo:
    """Check a model without lowering it and summarize it (ModelError when refused)."""
    limits = limits or Limits()
    return summarize(*read_and_screen(model, limits))


def summarize(proto: ModelProto, s: Screened) -> ModelInfo:
    """What the service shows of a screened model."""
    g = proto.graph
    weights = {t.name for t in g.initializer}
    params = sum(math.prod(t.dims) for t in g.initializer)
    params += sum(math.prod(t.dims) for t in g.sparse_initializer)
    return ModelInfo(
        inputs=[_describe(i) for i in g.input if i.name not in weights],
        outputs=[_describe(o) for o in g.output],
        op_histogram=dict(sorted(Counter(n.op_type for n in g.node).items())),
        parameters=int(params),
        opset=s.opset,
        ir_version=int(proto.ir_version),
        producer=proto.producer_name,
    )
