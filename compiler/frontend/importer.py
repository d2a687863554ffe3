"""`import_model`: ONNX -> Graph of tensor-expression Computes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import NodeProto, TensorProto, numpy_helper

from compiler.errors import ModelError, TileforgeError, UnsupportedOpError
from compiler.frontend.binding import bind_inputs
from compiler.frontend.builder import Builder
from compiler.frontend.choices import Chooser, by_default
from compiler.frontend.dtypes import ir_dtype
from compiler.frontend.exprs import elementwise
from compiler.frontend.functions import expand
from compiler.frontend.fusion import ChannelScaleFolding, fold_batchnorm_into_conv
from compiler.frontend.limits import Limits
from compiler.frontend.loader import (
    DEFAULT_DOMAINS,
    ModelSource,
    all_nodes,
    subgraphs,
    unsupported_reason,
)
from compiler.frontend.model_info import ModelInfo, Screened, read_and_screen, summarize
from compiler.frontend.names import shorten, shown
from compiler.frontend.ops import LOWERINGS, SUPPORTED_OPS
from compiler.frontend.prune import prune
from compiler.frontend.registry import TAKES_SEQUENCES, OpContext
from compiler.frontend.values import AnyValue, SequenceValue, Value
from compiler.ir.graph import Graph, TensorKind


def tensor_array(t: TensorProto, what: str) -> np.ndarray:
    """A TensorProto's value as numpy (refusing element types the IR lacks)."""
    dt = ir_dtype(t.data_type, what)
    return np.asarray(numpy_helper.to_array(t)).astype(dt, copy=False)


def attributes(node: NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values (strings decoded, tensors as numpy)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, TensorProto):
            v = tensor_array(v, f"attribute {a.name} of node {shown(node.name)}")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        out[a.name] = v
    return out


def lower_node(b: Builder, node: NodeProto, values: dict[str, AnyValue], opset: int) -> None:
    """Lower one node, binding its output names to Values (or SequenceValues)."""
    inputs = [values[i] if i else None for i in node.input]
    if node.op_type not in TAKES_SEQUENCES and any(isinstance(v, SequenceValue) for v in inputs):
        raise UnsupportedOpError(shorten(node.op_type), shorten(node.name),
                                 "a sequence input where this operator takes tensors")
    if node.op_type not in LOWERINGS:
        lower_function(b, node, values, opset)
        return
    b.op, b.node_name = node.op_type, node.name
    cx = OpContext(b, node.op_type, node.name, inputs, attributes(node), len(node.output), opset,
                   lambda graph, inputs: lower_subgraph(b, graph, values, opset, inputs))
    try:
        outs = LOWERINGS[node.op_type](cx)
    except TileforgeError:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as e:
        raise UnsupportedOpError(shorten(node.op_type), shorten(node.name),
                                 f"cannot lower this node: {shorten(str(e))}") from e
    for k, name in enumerate(node.output):
        if not name:
            continue
        v = outs[k] if k < len(outs) else None
        if v is None:
            raise cx.unsupported(f"output {k} is not supported")
        values[name] = v


def lower_subgraph(b: Builder, graph: onnx.GraphProto, outer: dict[str, AnyValue], opset: int,
                   inputs: Sequence[AnyValue] = ()) -> list[AnyValue]:
    """Lower a subgraph (If branch, loop body) that sees the outer scope, its inputs bound to
    `inputs`; returns its outputs' values."""
    if len(inputs) != len(graph.input):
        raise ModelError(f"a subgraph takes {len(graph.input)} inputs, the node gives {len(inputs)}")
    scope = dict(outer)  # names the subgraph defines stay inside it
    scope.update((vi.name, v) for vi, v in zip(graph.input, inputs, strict=True))
    for init in graph.initializer:
        scope[init.name] = Value.of_array(tensor_array(init, f"initializer {shown(init.name)}"), name=init.name)
    for node in graph.node:
        _require_lowering(node, node, unsupported_reason(node.op_type))
        missing = [i for i in node.input if i and i not in scope]
        if missing:
            raise ModelError(f"node {shown(node.name)} in a subgraph reads {shown(missing[0])}, which is not defined")
        lower_node(b, node, scope, opset)
    return [scope[o.name] for o in graph.output]


def lower_function(b: Builder, node: NodeProto, values: dict[str, AnyValue], opset: int) -> None:
    """Lower a function-defined op through the nodes of its body."""
    try:
        body, body_opset = expand(node, opset, [values[i] if i else None for i in node.input])
    except (onnx.checker.ValidationError, RuntimeError, ValueError) as e:
        raise UnsupportedOpError(shorten(node.op_type), shorten(node.name),
                                 f"cannot instantiate its function body: {shorten(str(e))}") from None
    for inner in body:
        _require_lowering(inner, node, f"its function body uses {shorten(inner.op_type)}, which has no lowering")
        lower_node(b, inner, values, body_opset)


def _require_lowering(node: NodeProto, blamed: NodeProto, why: str) -> None:
    """UnsupportedOpError naming `blamed` when `node` (met inside it) has no lowering."""
    if node.op_type not in SUPPORTED_OPS or node.domain not in DEFAULT_DOMAINS:
        raise UnsupportedOpError(shorten(blamed.op_type), shorten(blamed.name), why)


def names_read(nodes: Sequence[NodeProto]) -> set[str]:
    """Every value name the nodes read, inside their subgraphs (If branches) too."""
    out: set[str] = set()
    for n in all_nodes(nodes):
        out.update(n.input)
        for g in subgraphs(n):
            out.update(o.name for o in g.output)
    return out


def bind_outputs(b: Builder, names: Sequence[str], values: Mapping[str, AnyValue]) -> None:
    """Make each graph output a node-produced tensor of its own, named as in the model.

    An output that is a constant, an input or a weight, or that shares storage
    with an earlier output, gets an identity copy. A name the model lists twice
    (the dynamo exporter does, for a value returned twice) is one output:
    outputs are returned by name.
    """
    g = b.graph
    taken: set[int] = set()
    for name in dict.fromkeys(names):
        v = values[name]
        if isinstance(v, SequenceValue):
            raise ModelError(f"output {shown(name)} is a sequence; only tensor outputs are supported")
        tid = b.tensor_of(v)
        storage = g.storage_of(tid)
        if g.tensors[storage].kind != TensorKind.INTERMEDIATE or storage in taken:
            copy = dataclasses.replace(elementwise([v], lambda x: x), label="Identity")
            tid = g.add_node("Identity", copy, (tid,)).id
            storage = tid
        taken.add(storage)
        g.tensors[tid].name = name
        g.outputs.append(tid)


def import_model(
    model: ModelSource,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    limits: Limits | None = None,
    choose: Chooser = by_default,
) -> Graph:
    """Check, bind and lower an ONNX model to a Graph of Computes (ModelError when refused).

    `input_shapes` gives the full shape of inputs with symbolic dims; `choose` picks
    between an op's two lowerings where it has two (compiler/frontend/choices.py).
    """
    limits = limits or Limits()
    proto, screened = read_and_screen(model, limits)
    return _lower(proto, screened, input_shapes or {}, limits, choose)


def check_model(model: ModelSource, limits: Limits | None = None) -> ModelInfo:
    """`inspect_model`, and where every input shape is known, the lowering too (read and
    screened once): a model the compiler would refuse (a MatMul whose inner dimensions
    differ, a constant index out of range) is refused here, by name. Symbolic shapes
    wait for a compile's `input_shapes`."""
    limits = limits or Limits()
    proto, screened = read_and_screen(model, limits)
    info = summarize(proto, screened)
    if all(i["shape"] is not None and all(isinstance(d, int) for d in i["shape"]) for i in info.inputs):
        _lower(proto, screened, {}, limits)
    return info


def _lower(proto: onnx.ModelProto, screened: Screened, input_shapes: Mapping[str, Sequence[int]],
           limits: Limits, choose: Chooser = by_default) -> Graph:
    """Bind and lower a screened model to a Graph of Computes."""
    g = proto.graph
    if g.sparse_initializer:
        raise ModelError("sparse initializers are not supported")
    b = Builder(limits, choose)
    values: dict[str, AnyValue] = {}
    for bound in bind_inputs(g, input_shapes):
        b.check_shape(bound.shape, f"input {shown(bound.name)}")
        t = b.graph.new_tensor(bound.shape, bound.dtype, TensorKind.INPUT, name=bound.name)
        b.graph.inputs.append(t.id)
        values[bound.name] = Value(t.shape, t.dtype, tid=t.id, name=bound.name)
    used = names_read(screened.nodes) | {o.name for o in g.output}
    for init in g.initializer:
        if init.name in used:
            values[init.name] = Value.of_array(tensor_array(init, f"initializer {shown(init.name)}"),
                                               name=init.name)
    outputs = [o.name for o in g.output]
    graph_outputs = set(outputs)
    nodes = fold_batchnorm_into_conv(screened.nodes, values, graph_outputs)
    scales = ChannelScaleFolding(nodes, graph_outputs)
    for node in nodes:
        for rewritten in scales.rewrite(node, values):
            lower_node(b, rewritten, values, screened.opset)
    bind_outputs(b, outputs, values)
    return prune(b.graph)
