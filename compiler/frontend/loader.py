"""Reading an ONNX model and the cheap refusals made before any heavy work.

Everything here looks only at the protobuf's structure (names, dims, counts),
never at large tensor payloads, so a hostile upload is turned away quickly.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, NodeProto, TensorProto

from compiler.errors import ModelError, UnsupportedOpError
from compiler.frontend.limits import Limits
from compiler.frontend.names import shorten, shown
from compiler.node_cap import MAX_NODES_VARIABLE
from compiler.onnx_shapes import infer_shapes

MIN_OPSET = 7
DEFAULT_DOMAINS = ("", "ai.onnx")

ModelSource = bytes | str | Path | ModelProto


def model_payload(model: ModelSource, limits: Limits) -> bytes | ModelProto:
    """The model as serialized bytes (a file path read), or the ModelProto given; oversized
    or empty input refused."""
    if isinstance(model, ModelProto):
        if model.ByteSize() > limits.max_model_bytes:
            raise ModelError(f"model is larger than the limit of {limits.max_model_bytes} bytes")
        return model
    if isinstance(model, str | Path):
        path = Path(model)
        if not path.is_file():
            raise ModelError("model file not found")
        if path.stat().st_size > limits.max_model_bytes:
            raise ModelError(f"model is larger than the limit of {limits.max_model_bytes} bytes")
        model = path.read_bytes()
    if not isinstance(model, bytes | bytearray):
        raise ModelError(f"expected ONNX bytes, a path or a ModelProto, got {type(model).__name__}")
    if len(model) > limits.max_model_bytes:
        raise ModelError(f"model is larger than the limit of {limits.max_model_bytes} bytes")
    if not model:
        raise ModelError("not an ONNX model: the upload is empty")
    return bytes(model)


def parse_payload(payload: bytes | ModelProto) -> ModelProto:
    """`model_payload`'s result as a ModelProto, refusing what is not an ONNX model."""
    if isinstance(payload, ModelProto):
        proto = payload
    else:
        proto = ModelProto()
        try:
            proto.ParseFromString(payload)
        except (DecodeError, ValueError, RuntimeError) as e:
            raise ModelError("not an ONNX model (or a truncated one): the bytes do not parse as "
                             f"an ONNX ModelProto ({type(e).__name__})") from None
    if not proto.HasField("graph") or proto.ir_version <= 0 or not proto.opset_import:
        raise ModelError("not an ONNX model: no graph, IR version or opset import")
    return proto


def default_opset(model: ModelProto) -> int:
    """The model's opset of the default ONNX domain; ModelError outside the supported range."""
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    newest = onnx.defs.onnx_opset_version()
    if not versions:
        raise ModelError("the model imports no opset of the default ONNX domain")
    v = max(versions)
    if not MIN_OPSET <= v <= newest:
        raise ModelError(f"opset {v} is outside the supported range {MIN_OPSET}..{newest}")
    return v


def _tensors_in_attributes(node: NodeProto) -> Iterator[TensorProto]:
    for a in node.attribute:
        if a.HasField("t"):
            yield a.t
        yield from a.tensors
        if a.HasField("sparse_tensor"):
            yield a.sparse_tensor.values


def _all_tensors(model: ModelProto) -> Iterator[tuple[str, TensorProto]]:
    g = model.graph
    for t in g.initializer:
        yield f"initializer {shown(t.name)}", t
    for s in g.sparse_initializer:
        yield f"sparse initializer {shown(s.values.name)}", s.values
    for n in g.node:
        for t in _tensors_in_attributes(n):
            yield f"constant in node {shown(n.name)}", t


def _dims_of_value_info(vi: onnx.ValueInfoProto) -> list[int | str] | None:
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in vi.type.tensor_type.shape.dim]


def check_shape_caps(what: str, dims: list[int | str], limits: Limits) -> None:
    """Refuse ranks and (statically known) element counts over the limits."""
    if len(dims) > limits.max_rank:
        raise ModelError(f"{what}: rank {len(dims)} exceeds the limit of {limits.max_rank}")
    known = [d for d in dims if isinstance(d, int)]
    if any(d < 0 for d in known):
        raise ModelError(f"{what}: negative dimension in {dims}")
    if math.prod(known) > limits.max_tensor_elements:
        raise ModelError(f"{what}: {math.prod(known)} elements exceeds the limit of "
                         f"{limits.max_tensor_elements}")


def check_value_infos(model: ModelProto, limits: Limits) -> None:
    """Rank and element caps over every declared or inferred value shape."""
    g = model.graph
    for kind, infos in (("input", g.input), ("output", g.output), ("value", g.value_info)):
        for vi in infos:
            dims = _dims_of_value_info(vi)
            if dims is not None:
                check_shape_caps(f"{kind} {shown(vi.name)}", dims, limits)


def _element_bytes(elem_type: int) -> int:
    try:
        return max(1, onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except (KeyError, ValueError, TypeError):
        return 1


def check_payloads(model: ModelProto, limits: Limits) -> int:
    """Refuse external data and oversized constants; returns the total weight bytes."""
    total = 0
    for what, t in _all_tensors(model):
        if t.data_location == TensorProto.EXTERNAL or t.external_data:
            raise ModelError(f"{what} references external data; embed all weights in the model")
        check_shape_caps(what, list(t.dims), limits)
        total += math.prod(t.dims) * _element_bytes(t.data_type)
    if total > limits.max_weight_bytes:
        raise ModelError(f"the model's weights take {total} bytes, over the limit of "
                         f"{limits.max_weight_bytes}")
    return total


def subgraphs(node: NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs held in a node's attributes (If branches, loop bodies)."""
    for a in node.attribute:
        if a.HasField("g"):
            yield a.g
        yield from a.graphs


def all_nodes(nodes: Iterable[NodeProto]) -> Iterator[NodeProto]:
    """The nodes and, recursively, those of their subgraphs."""
    for n in nodes:
        yield n
        for g in subgraphs(n):
            yield from all_nodes(g.node)


# Ops whose output shape is made of the input's values (torch's x[mask], unique, nms): a
# static-shape compiler has no layout for them.
DATA_DEPENDENT_OPS = frozenset({"NonZero", "Unique", "Compress", "NonMaxSuppression"})


def unsupported_reason(op_type: str) -> str:
    """Why an op type without a lowering is refused."""
    if op_type in DATA_DEPENDENT_OPS:
        return "no lowering: its output shape depends on the input values, which static shapes cannot express"
    return "no lowering for this operator type"


def check_ops(model: ModelProto, supported: frozenset[str], limits: Limits) -> None:
    """Refuse too many nodes, foreign domains and op types without a lowering (subgraphs included)."""
    nodes = list(all_nodes(model.graph.node))
    if len(nodes) > limits.max_nodes:
        raise ModelError(f"the model has {len(nodes)} nodes, over the limit of {limits.max_nodes} "
                         f"({MAX_NODES_VARIABLE})")
    for n in nodes:
        if n.domain not in DEFAULT_DOMAINS:
            raise UnsupportedOpError(shorten(n.op_type), shorten(n.name),
                                     f"operator domain {shown(n.domain)} is not supported")
        if n.op_type not in supported:
            raise UnsupportedOpError(shorten(n.op_type), shorten(n.name), unsupported_reason(n.op_type))


def topological_order(model: ModelProto) -> list[NodeProto]:
    """The nodes in dependency order; refuses missing inputs, double definitions and cycles."""
    g = model.graph
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    defined |= {s.values.name for s in g.sparse_initializer}
    producer: dict[str, int] = {}
    for k, n in enumerate(g.node):
        for o in n.output:
            if not o:
                continue
            if o in producer or o in defined:
                raise ModelError(f"value {shown(o)} is defined more than once "
                                 f"(again by node {shown(n.name)})")
            producer[o] = k
    deps: list[set[int]] = []
    for n in g.node:
        d = set()
        for i in n.input:
            if not i or i in defined:
                continue
            if i not in producer:
                raise ModelError(f"node {shown(n.name)} ({shorten(n.op_type)}) reads {shown(i)}, "
                                 "which no input, initializer or node provides")
            d.add(producer[i])
        deps.append(d)
    for o in g.output:
        if o.name not in producer and o.name not in defined:
            raise ModelError(f"graph output {shown(o.name)} is not produced by any node or input")
    users: list[list[int]] = [[] for _ in g.node]
    for k, d in enumerate(deps):
        for p in d:
            users[p].append(k)
    pending = [len(d) for d in deps]
    # Lowest index first: a graph already in order keeps its order.
    ready = [k for k, c in enumerate(pending) if c == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for u in users[k]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(g.node):
        stuck = next(k for k, c in enumerate(pending) if c > 0)
        raise ModelError(f"the graph has a cycle (through node {shown(g.node[stuck].name)}, "
                         f"{shorten(g.node[stuck].op_type)})")
    return [g.node[k] for k in order]


def check_with_onnx(model: ModelProto, serialized: bytes | None = None) -> ModelProto:
    """onnx.checker, then shape inference; returns the inferred model (compiler.onnx_shapes:
    shapes and small constants, no large weights).

    `serialized`, the bytes `model` was parsed from where the caller has them, is what the
    checker reads: serializing the model again for it took 0.6 s of a 209 MB model's
    compile. The checker insists that graph outputs declare a shape, which onnxruntime
    does not; outputs without one get an empty shape only while it runs (and the checker
    then reads the model so changed).
    """
    shapeless = [o.type.tensor_type for o in model.graph.output
                 if o.type.HasField("tensor_type") and not o.type.tensor_type.HasField("shape")]
    for t in shapeless:
        t.shape.SetInParent()
    try:
        onnx.checker.check_model(model if shapeless or serialized is None else serialized)
    except onnx.checker.ValidationError as e:
        raise ModelError(f"invalid ONNX model: {shorten(str(e).splitlines()[0] if str(e) else '')}") from None
    finally:
        for t in shapeless:
            t.ClearField("shape")
    try:
        return infer_shapes(model, data_prop=True)
    except (onnx.shape_inference.InferenceError, RuntimeError) as e:
        raise ModelError(f"ONNX shape inference failed: {shorten(str(e))}") from None


