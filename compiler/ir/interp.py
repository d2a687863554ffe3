"""A numpy interpreter of tensor expressions: the executable meaning of the IR.

Slow and memory-hungry by design (it materializes the whole index space, in
chunks of the outermost axis); it exists so that lowering can be checked
against onnxruntime without any code generation, and generated code can be
checked against it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from compiler.ir.dtypes import dtype
from compiler.ir.te import ACC, INIT, Call, Compute, Const, Expr, Load, Var

_CHUNK_ELEMS = 1 << 22


def _np_call(op: str, args: list[np.ndarray], out_dtype: str) -> np.ndarray:
    a = args
    np_t = dtype(out_dtype).np_type
    with np.errstate(all="ignore"):
        if op == "cast":
            x = a[0]
            if dtype(out_dtype).is_float or x.dtype.kind != "f":
                return x.astype(np_t)
            # float -> int: C truncation toward zero; out-of-range is undefined, keep numpy's
            return np.trunc(x).astype(np_t)
        if op == "select":
            return np.where(a[0].astype(bool), a[1], a[2])
        if op == "div":
            if np.dtype(np_t).kind in "iu":
                # C semantics: truncation toward zero
                q = np.trunc(a[0].astype(np.float64) / np.where(a[1] == 0, 1, a[1]))
                return q.astype(np_t)
            return np.divide(a[0], a[1]).astype(np_t)
        if op == "mod":  # integer mod with the sign of the divisor (ONNX fmod=0)
            return np.mod(a[0], np.where(a[1] == 0, 1, a[1])).astype(np_t)
        table = {
            "add": np.add, "sub": np.subtract, "mul": np.multiply, "neg": np.negative,
            "abs": np.abs, "min": np.minimum, "max": np.maximum, "pow": np.power, "fmod": np.fmod,
            "floordiv": np.floor_divide, "floormod": np.mod,
            "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin,
            "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
            "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
            "acosh": np.arccosh, "atanh": np.arctanh, "floor": np.floor, "ceil": np.ceil,
            "round": np.rint, "sign": np.sign, "reciprocal": np.reciprocal,
            "isnan": np.isnan, "isinf": np.isinf,
            "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal, "and": np.logical_and,
            "or": np.logical_or, "xor": np.logical_xor, "not": np.logical_not,
            "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
            "bitnot": np.invert, "shl": np.left_shift, "shr": np.right_shift,
        }
        if op == "erf":
            return _erf(a[0]).astype(np_t)
        return np.asarray(table[op](*a)).astype(np_t)


def _erf(x: np.ndarray) -> np.ndarray:
    from math import erf

    return np.vectorize(erf, otypes=[np.float64])(x.astype(np.float64))


def _eval(e: Expr, env: dict[str, np.ndarray], inputs: Sequence[np.ndarray]) -> np.ndarray:
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Const):
        return np.asarray(e.value, dtype=dtype(e.dtype).np_type)
    if isinstance(e, Load):
        arr = inputs[e.input]
        idx = [np.asarray(_eval(i, env, inputs)).astype(np.int64) for i in e.indices]
        if not idx:
            return np.asarray(arr[()])
        idx = list(np.broadcast_arrays(*idx))
        if e.pad is None:
            return arr[tuple(idx)]
        ok = np.ones(idx[0].shape, dtype=bool)
        for d, i in enumerate(idx):
            ok &= (i >= 0) & (i < arr.shape[d])
        clipped = tuple(np.clip(i, 0, max(0, arr.shape[d] - 1)) for d, i in enumerate(idx))
        vals = arr[clipped] if arr.size else np.zeros(idx[0].shape, arr.dtype)
        return np.where(ok, vals, np.asarray(e.pad).astype(arr.dtype))
    if isinstance(e, Call):
        args = [np.asarray(_eval(a, env, inputs)) for a in e.args]
        return _np_call(e.op, args, e.dtype)
    raise TypeError(f"not a TE expression: {e!r}")


def evaluate(c: Compute, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """Compute `c` over numpy inputs (one per `c.inputs`, in order)."""
    if c.stages:  # a fused group: its members in order, each reading the ones before
        values = list(inputs)
        for member in c.members():
            values.append(evaluate(member, values))
        return values[-1]
    for i, (t, x) in enumerate(zip(c.inputs, inputs, strict=True)):
        if tuple(x.shape) != tuple(t.shape):
            raise ValueError(f"input {i}: shape {x.shape} != declared {t.shape}")
    out = np.empty(c.shape, dtype=dtype(c.dtype).np_type)
    if out.size == 0:
        return out
    red_shape = tuple(a.extent for a in c.reduce_axes)
    per_outer = math.prod(c.shape[1:]) * max(1, math.prod(red_shape))
    chunk = max(1, _CHUNK_ELEMS // max(1, per_outer)) if c.axes else 1
    outer = c.shape[0] if c.axes else 1
    for start in range(0, outer, chunk):
        stop = min(outer, start + chunk)
        sub_shape = (stop - start, *c.shape[1:]) if c.axes else ()
        full = (*sub_shape, *red_shape)
        env: dict[str, np.ndarray] = {}
        for k, a in enumerate((*c.axes, *c.reduce_axes)):
            shape = [1] * len(full)
            shape[k] = full[k]
            base = np.arange(full[k], dtype=np.int64) + (start if k == 0 and c.axes else 0)
            env[a.name] = base.reshape(shape)
        body = np.broadcast_to(_eval(c.body, env, inputs), full)
        if c.reduce_op is not None:
            axes = tuple(range(len(sub_shape), len(full)))
            acc_t = dtype(c.acc_dtype).np_type
            if 0 in red_shape:
                acc = np.full(sub_shape, INIT[c.reduce_op](c.acc_dtype), dtype=acc_t)
            else:
                fn = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}[c.reduce_op]
                acc = fn(body.astype(acc_t), axis=axes).astype(acc_t) if axes else body.astype(acc_t)
            val = acc
            if c.post is not None:
                penv = {k: v[(...,) + (0,) * len(red_shape)] if len(red_shape) else v
                        for k, v in env.items() if k in {a.name for a in c.axes}}
                penv[ACC] = np.asarray(acc)
                val = np.broadcast_to(_eval(c.post, penv, inputs), sub_shape)
        else:
            val = body
        if c.axes:
            out[start:stop] = val
        else:
            out[()] = val
    return out
