"""Operators lowered through their ONNX function body: the schema defines them as a
small graph of simpler operators (Attention, RotaryEmbedding, SwiGLU, ...), which
is instantiated for the node and lowered node by node."""

from __future__ import annotations

import itertools

import onnx
from onnx import AttributeProto, FunctionProto, NodeProto, TypeProto, helper

from compiler.frontend.dtypes import onnx_elem_type
from compiler.frontend.loader import DEFAULT_DOMAINS
from compiler.frontend.values import Value

# Function-defined ops not expanded: random sampling and sequence types.
_EXCLUDED = frozenset({"Bernoulli", "SequenceMap"})

_fresh = itertools.count()


def _plain_body_ops(schema: onnx.defs.OpSchema) -> set[str]:
    ops: set[str] = set()
    for version in schema.function_opset_versions:
        fn = FunctionProto()
        fn.ParseFromString(schema.get_function_with_opset_version(version))
        ops |= {n.op_type for n in fn.node}
    return ops


def function_ops(lowered: frozenset[str]) -> frozenset[str]:
    """Default-domain ops without a lowering of their own that onnx defines by a function body
    (a fixed body must use lowered ops only; a context-dependent one is checked when expanded)."""
    return frozenset(
        s.name for s in onnx.defs.get_all_schemas()
        if s.domain in DEFAULT_DOMAINS and s.name not in lowered and s.name not in _EXCLUDED
        and (s.has_context_dependent_function or (s.has_function and _plain_body_ops(s) <= lowered))
    )


def _type_of(v: Value | None) -> TypeProto:
    if v is None:
        return TypeProto()
    return helper.make_tensor_type_proto(onnx_elem_type(v.dtype), list(v.shape))


def _attributes(node: NodeProto, opset: int) -> dict[str, AttributeProto]:
    """The node's attributes with the schema's defaults filled in (bodies refer to both)."""
    attrs = {a.name: a for a in node.attribute}
    for name, attr in onnx.defs.get_schema(node.op_type, opset, "").attributes.items():
        if name not in attrs and attr.default_value.name:
            attrs[name] = attr.default_value
    return attrs


def _body(node: NodeProto, opset: int, inputs: list[Value | None]) -> FunctionProto:
    schema = onnx.defs.get_schema(node.op_type, opset, "")
    full = NodeProto()
    full.CopyFrom(node)
    del full.attribute[:]
    full.attribute.extend(_attributes(node, opset).values())
    fn = FunctionProto()
    plain = [v for v in schema.function_opset_versions if v <= opset]
    if plain:
        fn.ParseFromString(schema.get_function_with_opset_version(max(plain)))
        return fn
    versions = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    fn.ParseFromString(schema.get_context_dependent_function_with_opset_version(
        max(versions), full.SerializeToString(), [_type_of(v).SerializeToString() for v in inputs]))
    return fn


def expand(node: NodeProto, opset: int, inputs: list[Value | None]) -> tuple[list[NodeProto], int]:
    """The nodes of `node`'s function body wired to its inputs and outputs, and the body's opset.

    Internal values get fresh names that cannot collide with the model's.
    """
    fn = _body(node, opset, inputs)
    prefix = f"\0fn{next(_fresh)}:"
    names = {formal: actual for formal, actual in zip(fn.input, node.input, strict=False)}
    names.update({formal: actual for formal, actual in zip(fn.output, node.output, strict=False) if actual})
    attrs = _attributes(node, opset)

    def rename(n: str) -> str:
        return "" if not n else names.get(n, prefix + n)

    def instantiate(inner: NodeProto) -> NodeProto:
        new = NodeProto()
        new.CopyFrom(inner)
        new.input[:] = [rename(n) for n in inner.input]
        new.output[:] = [rename(n) for n in inner.output]
        new.name = node.name
        del new.attribute[:]
        for a in inner.attribute:
            if a.ref_attr_name:
                if a.ref_attr_name in attrs:
                    bound = AttributeProto()
                    bound.CopyFrom(attrs[a.ref_attr_name])
                    bound.name = a.name
                    new.attribute.append(bound)
                continue
            bound = AttributeProto()
            bound.CopyFrom(a)
            for g in ([bound.g] if bound.HasField("g") else []) + list(bound.graphs):
                instantiate_graph(g)
            new.attribute.append(bound)
        return new

    def instantiate_graph(g: onnx.GraphProto) -> None:
        """A subgraph (If branch) refers to the body's names: rename them the same way, in place."""
        nodes = [instantiate(n) for n in g.node]
        del g.node[:]
        g.node.extend(nodes)
        for v in (*g.input, *g.output, *g.value_info):
            v.name = rename(v.name)
        for t in g.initializer:
            t.name = rename(t.name)

    out = [instantiate(inner) for inner in fn.node]
    body_opset = next((o.version for o in fn.opset_import if o.domain in DEFAULT_DOMAINS), opset)
    return out, body_opset
