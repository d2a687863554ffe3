"""An ONNX graph run as PyTorch eager ops: the "PyTorch" side of a GPU benchmark for models
that exist only as ONNX (the zoo builds its models in ONNX, not in torch).

`TorchGraph(model)` is an `nn.Module` whose forward walks the graph's nodes and calls one
torch function per node, which is what eager PyTorch does for the same layers; wrapped
in `torch.compile` it is what the compiler makes of them. Integer initializers (shapes,
axes, split sizes) become Python ints (IntConst) so that shape arguments are constants, not device
tensors that a compiled graph would have to read back. Ops outside the table raise
`UnsupportedOp` naming them. Needs torch (the benchmark machine has it; tileforge does not).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


class UnsupportedOp(ValueError):
    """The model uses an op this interpreter does not map to torch."""


@dataclass(frozen=True)
class IntConst:
    """An integer initializer as Python ints: shape arguments that torch.compile sees as
    constants (a tensor or numpy array there would be data to read back)."""

    values: tuple[int, ...]
    shape: tuple[int, ...]


Value = Any  # a torch.Tensor, or an IntConst


def _tensor(x: Value, like: torch.Tensor | None = None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    t = torch.tensor(list(x.values), dtype=torch.int64).reshape(x.shape)
    return t.to(like.device) if like is not None else t


def _ints(x: Value) -> list[int]:
    if isinstance(x, IntConst):
        return list(x.values)
    return [int(v) for v in x.reshape(-1).tolist()]


def _binary(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable:
    def op(ins: Sequence[Value], at: dict) -> torch.Tensor:
        a, b = ins
        like = a if isinstance(a, torch.Tensor) else b if isinstance(b, torch.Tensor) else None
        return fn(_tensor(a, like), _tensor(b, like))
    return op


def _unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable:
    return lambda ins, at: fn(_tensor(ins[0]))


def _pads(at: dict, dims: int) -> tuple[list[int], bool]:
    """ONNX pads (begin..., end...) as torch's symmetric padding, or explicit F.pad."""
    if at.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise UnsupportedOp(f"auto_pad={at['auto_pad']}")
    pads = at.get("pads", [0] * (2 * dims))
    return pads, pads[:dims] == pads[dims:]


def _padded(x: torch.Tensor, pads: list[int], dims: int, value: float = 0.0) -> torch.Tensor:
    spec: list[int] = []
    for d in reversed(range(dims)):
        spec += [pads[d], pads[d + dims]]
    return F.pad(x, spec, value=value)


def _conv(ins: Sequence[Value], at: dict) -> torch.Tensor:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 and ins[2] is not None else None
    dims = w.dim() - 2
    pads, symmetric = _pads(at, dims)
    if not symmetric:
        x, pads = _padded(x, pads, dims), [0] * (2 * dims)
    conv = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]
    return conv(x, w, b, stride=at.get("strides", 1), padding=pads[:dims],
                dilation=at.get("dilations", 1), groups=at.get("group", 1))


def _pool(kind: str) -> Callable:
    def op(ins: Sequence[Value], at: dict) -> torch.Tensor:
        x = ins[0]
        k = at["kernel_shape"]
        dims = len(k)
        pads, symmetric = _pads(at, dims)
        if not symmetric:
            x = _padded(x, pads, dims, float("-inf") if kind == "max" else 0.0)
            pads = [0] * (2 * dims)
        stride = at.get("strides", [1] * dims)
        ceil = bool(at.get("ceil_mode", 0))
        if kind == "max":
            fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[dims - 1]
            return fn(x, k, stride, pads[:dims], at.get("dilations", 1), ceil)
        fn = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[dims - 1]
        return fn(x, k, stride, pads[:dims], ceil, bool(at.get("count_include_pad", 0)))
    return op


def _gemm(ins: Sequence[Value], at: dict) -> torch.Tensor:
    a, b = ins[0], ins[1]
    a = a.t() if at.get("transA", 0) else a
    b = b.t() if at.get("transB", 0) else b
    y = at.get("alpha", 1.0) * (a @ b)
    if len(ins) > 2 and ins[2] is not None:
        y = y + at.get("beta", 1.0) * ins[2]
    return y


def _reshape(ins: Sequence[Value], at: dict) -> torch.Tensor:
    x, shape = ins[0], _ints(ins[1])
    if not at.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _layer_norm(ins: Sequence[Value], at: dict) -> torch.Tensor:
    x = ins[0]
    axis = at.get("axis", -1) % x.dim()
    shape = x.shape[axis:]
    bias = ins[2] if len(ins) > 2 else None
    return F.layer_norm(x, shape, ins[1].expand(shape), None if bias is None else bias.expand(shape),
                        at.get("epsilon", 1e-5))


def _batch_norm(ins: Sequence[Value], at: dict) -> torch.Tensor:
    x, scale, bias, mean, var = ins[:5]
    return F.batch_norm(x, mean, var, scale, bias, False, 0.0, at.get("epsilon", 1e-5))


def _split(ins: Sequence[Value], at: dict, n_out: int) -> tuple[torch.Tensor, ...]:
    x, axis = ins[0], at.get("axis", 0)
    if len(ins) > 1 and ins[1] is not None:
        sizes = _ints(ins[1])
    elif "split" in at:
        sizes = list(at["split"])
    else:
        n = x.shape[axis]
        step = -(-n // n_out)
        sizes = [min(step, n - i * step) for i in range(n_out)]
    return tuple(torch.split(x, sizes, dim=axis))


def _slice(ins: Sequence[Value], at: dict) -> torch.Tensor:
    x = ins[0]
    starts, ends = _ints(ins[1]), _ints(ins[2])
    axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index: list[slice] = [slice(None)] * x.dim()
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        if st < 0:
            raise UnsupportedOp("Slice with a negative step")
        n = x.shape[a]
        s, e = max(0, min(n, s + n if s < 0 else s)), max(0, min(n, e + n if e < 0 else e))
        index[a] = slice(s, e, st)
    return x[tuple(index)]


def _axes(ins: Sequence[Value], at: dict) -> list[int] | None:
    if len(ins) > 1 and ins[1] is not None:
        return _ints(ins[1])
    return list(at["axes"]) if "axes" in at else None


def _squeeze(ins: Sequence[Value], at: dict) -> torch.Tensor:
    axes = _axes(ins, at)
    x = ins[0]
    return x.squeeze() if axes is None else x.squeeze(tuple(a % x.dim() for a in axes))


def _unsqueeze(ins: Sequence[Value], at: dict) -> torch.Tensor:
    x, axes = ins[0], _axes(ins, at) or []
    rank = x.dim() + len(axes)
    for a in sorted(a % rank for a in axes):
        x = x.unsqueeze(a)
    return x


def _reduce(fn: Callable) -> Callable:
    def op(ins: Sequence[Value], at: dict) -> torch.Tensor:
        x, axes = ins[0], _axes(ins, at)
        dims = tuple(range(x.dim())) if not axes else tuple(axes)
        return fn(x, dim=dims, keepdim=bool(at.get("keepdims", 1)))
    return op


def _scalar(x: Value) -> float | None:
    if x is None or isinstance(x, float | int):
        return x
    return float(x.values[0]) if isinstance(x, IntConst) else float(x.item())


def _clip(ins: Sequence[Value], at: dict) -> torch.Tensor:
    lo = ins[1] if len(ins) > 1 and ins[1] is not None else at.get("min")
    hi = ins[2] if len(ins) > 2 and ins[2] is not None else at.get("max")
    return torch.clamp(ins[0], _scalar(lo), _scalar(hi))


def _gelu(ins: Sequence[Value], at: dict) -> torch.Tensor:
    return F.gelu(ins[0], approximate="tanh" if at.get("approximate", "none") == "tanh" else "none")


OPS: dict[str, Callable[[Sequence[Value], dict], Any]] = {
    "Add": _binary(torch.add), "Sub": _binary(torch.sub), "Mul": _binary(torch.mul),
    "Div": _binary(torch.div), "Pow": _binary(torch.pow), "MatMul": _binary(torch.matmul),
    "Max": _binary(torch.maximum), "Min": _binary(torch.minimum),
    "Relu": _unary(F.relu), "Sigmoid": _unary(torch.sigmoid), "Tanh": _unary(torch.tanh),
    "Erf": _unary(torch.erf), "Exp": _unary(torch.exp), "Log": _unary(torch.log),
    "Sqrt": _unary(torch.sqrt), "Neg": _unary(torch.neg), "Abs": _unary(torch.abs),
    "Reciprocal": _unary(torch.reciprocal), "Identity": lambda ins, at: ins[0],
    "Gelu": _gelu, "Softmax": lambda ins, at: torch.softmax(ins[0], at.get("axis", -1)),
    "LayerNormalization": _layer_norm, "BatchNormalization": _batch_norm,
    "Conv": _conv, "MaxPool": _pool("max"), "AveragePool": _pool("avg"),
    "GlobalAveragePool": lambda ins, at: ins[0].mean(tuple(range(2, ins[0].dim())), keepdim=True),
    "Gemm": _gemm, "Reshape": _reshape,
    "Transpose": lambda ins, at: ins[0].permute(at.get("perm", list(reversed(range(ins[0].dim()))))),
    "Flatten": lambda ins, at: ins[0].reshape(int(np.prod(ins[0].shape[:at.get("axis", 1)])), -1),
    "Concat": lambda ins, at: torch.cat([_tensor(x, ins[0]) for x in ins], at["axis"]),
    "Slice": _slice, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Clip": _clip,
    "ReduceMean": _reduce(torch.mean), "ReduceSum": _reduce(torch.sum),
    "HardSigmoid": lambda ins, at: torch.clamp(at.get("alpha", 0.2) * ins[0] + at.get("beta", 0.5), 0, 1),
    "HardSwish": _unary(F.hardswish),
}


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    out = {}
    for a in node.attribute:
        value = onnx.helper.get_attribute_value(a)
        out[a.name] = value.decode() if isinstance(value, bytes) else value
    return out


class TorchGraph(torch.nn.Module):
    """`model` as a torch module: forward(*inputs) -> tuple of outputs, node by node."""

    def __init__(self, model: onnx.ModelProto) -> None:
        super().__init__()
        g = model.graph
        unknown = sorted({n.op_type for n in g.node if n.op_type not in OPS and n.op_type != "Split"})
        if unknown:
            raise UnsupportedOp(f"no torch mapping for {', '.join(unknown)}")
        self._constants: dict[str, IntConst] = {}
        self._buffers_by_value: dict[str, str] = {}
        for n, init in enumerate(g.initializer):
            arr = numpy_helper.to_array(init)
            if np.issubdtype(arr.dtype, np.floating):
                self.register_buffer(f"c{n}", torch.from_numpy(arr.copy()))
                self._buffers_by_value[init.name] = f"c{n}"
            else:
                self._constants[init.name] = IntConst(tuple(int(v) for v in arr.reshape(-1)),
                                                      tuple(arr.shape))
        initialized = {i.name for i in g.initializer}
        self.inputs = [i.name for i in g.input if i.name not in initialized]
        self.outputs = [o.name for o in g.output]
        self._nodes = [(n.op_type, list(n.input), list(n.output), _attributes(n)) for n in g.node]

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env: dict[str, Value] = dict(self._constants)
        env.update({v: getattr(self, b) for v, b in self._buffers_by_value.items()})
        env.update(zip(self.inputs, args, strict=True))
        for op, ins, outs, at in self._nodes:
            values = [env[i] if i else None for i in ins]
            result = _split(values, at, len(outs)) if op == "Split" else (OPS[op](values, at),)
            env.update(zip(outs, result, strict=True))
        return tuple(env[o] for o in self.outputs)
