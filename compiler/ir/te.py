"""Tensor expressions: the one abstraction the whole compiler stands on.

A `Compute` is an output index space (spatial axes), optional reduce axes with
a reduce op, and a scalar body over `Load`s of its inputs. Index expressions
are ordinary integer expressions over the axes (affine in practice, with
min/max/select for clamping and padding, and data-dependent loads for gather).

Everything is an immutable tree of four node kinds: `Var`, `Const`, `Load` and
`Call`. Inputs are referred to by position, never by name, so a Compute is
self-contained and its canonical serialization identifies it for the cache.

Three analyses follow from a Compute and a tile (`region_of`, `footprint`,
`traffic`); every scheduling decision in the compiler is made from them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from compiler.ir.dtypes import INDEX, dtype

# ---------------------------------------------------------------------------
# Expression nodes
# ---------------------------------------------------------------------------

# op name -> arity (None = variadic). The C and numpy renderings of each op live
# with the renderers; this table is the closed set the IR admits.
OPS: dict[str, int | None] = {
    # arithmetic
    "add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1, "abs": 1,
    "min": 2, "max": 2, "pow": 2, "mod": 2, "fmod": 2,
    # integer index arithmetic (floor semantics, divisor > 0)
    "floordiv": 2, "floormod": 2,
    # transcendental
    "exp": 1, "log": 1, "sqrt": 1, "tanh": 1, "erf": 1, "sin": 1, "cos": 1,
    "tan": 1, "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1,
    "asinh": 1, "acosh": 1, "atanh": 1, "floor": 1, "ceil": 1, "round": 1,
    "sign": 1, "reciprocal": 1, "isnan": 1, "isinf": 1,
    # comparison and logic (result bool)
    "eq": 2, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2,
    "and": 2, "or": 2, "xor": 2, "not": 1,
    # bitwise on integers
    "bitand": 2, "bitor": 2, "bitxor": 2, "bitnot": 1, "shl": 2, "shr": 2,
    # control
    "select": 3, "cast": 1,
}

BOOL_RESULT = {"eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "not", "isnan", "isinf"}


class Expr:
    """Base of the scalar expression tree. Python operators build `Call`s."""

    dtype: str

    def __add__(self, other: ExprLike) -> Expr:
        return call("add", self, other)

    def __radd__(self, other: ExprLike) -> Expr:
        return call("add", other, self)

    def __sub__(self, other: ExprLike) -> Expr:
        return call("sub", self, other)

    def __rsub__(self, other: ExprLike) -> Expr:
        return call("sub", other, self)

    def __mul__(self, other: ExprLike) -> Expr:
        return call("mul", self, other)

    def __rmul__(self, other: ExprLike) -> Expr:
        return call("mul", other, self)

    def __truediv__(self, other: ExprLike) -> Expr:
        return call("div", self, other)

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return call("div", other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return call("floordiv", self, other)

    def __mod__(self, other: ExprLike) -> Expr:
        return call("floormod", self, other)

    def __neg__(self) -> Expr:
        return call("neg", self)


ExprLike = Expr | int | float | bool


@dataclass(frozen=True, eq=True)
class Var(Expr):
    """An axis variable (spatial or reduce) or the accumulator `acc` in a post-expression."""

    name: str
    dtype: str = INDEX


@dataclass(frozen=True, eq=True)
class Const(Expr):
    """A scalar literal."""

    value: float | int | bool
    dtype: str


@dataclass(frozen=True, eq=True)
class Load(Expr):
    """Element `indices` of input number `input`.

    With `pad` set, an index outside the tensor reads `pad` instead (convolution
    and pooling padding); without it, indices are guaranteed in range.
    """

    input: int
    indices: tuple[Expr, ...]
    dtype: str
    pad: float | int | None = None


@dataclass(frozen=True, eq=True)
class Call(Expr):
    """An operator from `OPS` applied to arguments; `dtype` is the result type."""

    op: str
    args: tuple[Expr, ...]
    dtype: str


def const(value: float | int | bool, dt: str) -> Const:
    """A literal of the given dtype (value normalized to the Python kind of that dtype)."""
    if dt == "bool":
        return Const(bool(value), dt)
    if dtype(dt).is_float:
        return Const(float(value), dt)
    return Const(int(value), dt)


def _lift(x: ExprLike, like: str | None) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        return const(x, "bool")
    if isinstance(x, int):
        return const(x, like if like is not None else INDEX)
    return const(x, like if like is not None and dtype(like).is_float else "float32")


def call(op: str, *args: ExprLike, dt: str | None = None) -> Expr:
    """Build a Call; literals take the dtype of their expression siblings.

    The result type is bool for comparisons and logic, `dt` for casts, and the
    dtype of the (last, for select) value argument otherwise.
    """
    if op not in OPS:
        raise ValueError(f"unknown TE op {op!r}")
    arity = OPS[op]
    if arity is not None and len(args) != arity:
        raise ValueError(f"TE op {op!r} takes {arity} arguments, got {len(args)}")
    typed = [a.dtype for a in args if isinstance(a, Expr)]
    if op == "select":
        value_types = [a.dtype for a in args[1:] if isinstance(a, Expr)]
        like = value_types[0] if value_types else None
        lifted = (_lift(args[0], "bool"), _lift(args[1], like), _lift(args[2], like))
    else:
        like = typed[0] if typed else None
        lifted = tuple(_lift(a, like) for a in args)
    if op not in {"select", "cast"} and len({a.dtype for a in lifted}) > 1:
        raise TypeError(f"TE op {op!r} mixes dtypes {[a.dtype for a in lifted]}; cast first")
    if op == "cast":
        if dt is None:
            raise ValueError("cast needs a target dtype")
        result = dt
    elif op in BOOL_RESULT:
        result = "bool"
    elif op == "select":
        result = lifted[1].dtype
    else:
        result = lifted[0].dtype
    return _simplify(Call(op, lifted, result))


def cast(x: ExprLike, dt: str) -> Expr:
    """Convert to dtype `dt` (no-op when already of that type)."""
    e = _lift(x, None)
    return e if e.dtype == dt else Call("cast", (e,), dt)


def select(cond: ExprLike, a: ExprLike, b: ExprLike) -> Expr:
    """`a` where `cond` else `b`."""
    return call("select", cond, a, b)


# Float powers with these constant exponents become multiplies (GPT-2's GELU cubes its
# input: powf was a scalar call per element). x * x * x and x^4 as (x x)(x x) (the square
# shared) round twice: within 2 ulp of the exact power, overflowing and underflowing where it
# does (negative exponents would not: 1 / (x x) is 0 where x^-2 is a denormal). Not for
# float16, which rounds to half after every operation: there it would round twice.
SMALL_POWERS = (1, 2, 3, 4)


def _small_power(x: Expr, k: int) -> Expr:
    """x^k for k in SMALL_POWERS, by squaring."""
    if k == 1:
        return x
    half = _small_power(x, k // 2)
    square = Call("mul", (half, half), x.dtype)
    return Call("mul", (square, x), x.dtype) if k % 2 else square


def _simplify(e: Call) -> Expr:
    """Constant-fold integer index arithmetic, drop identities (x+0, x*1), and write a
    float power with a small integer constant exponent as multiplies."""
    a = e.args
    if (e.op == "pow" and e.dtype in {"float32", "float64"} and isinstance(a[1], Const)
            and a[1].value in SMALL_POWERS):
        return _small_power(a[0], int(a[1].value))
    if e.dtype != INDEX or e.op not in {"add", "sub", "mul", "floordiv", "floormod", "min", "max"}:
        return e
    if all(isinstance(x, Const) for x in a):
        x, y = (int(v.value) for v in a)  # type: ignore[union-attr]
        fold = {
            "add": x + y, "sub": x - y, "mul": x * y,
            "floordiv": x // y if y else None, "floormod": x % y if y else None,
            "min": min(x, y), "max": max(x, y),
        }[e.op]
        return e if fold is None else Const(fold, INDEX)
    if e.op in {"add", "sub"} and isinstance(a[1], Const) and a[1].value == 0:
        return a[0]
    if e.op == "add" and isinstance(a[0], Const) and a[0].value == 0:
        return a[1]
    if e.op == "mul":
        for i in (0, 1):
            if isinstance(a[i], Const) and a[i].value == 1:
                return a[1 - i]
            if isinstance(a[i], Const) and a[i].value == 0:
                return Const(0, INDEX)
    if e.op in {"floordiv"} and isinstance(a[1], Const) and a[1].value == 1:
        return a[0]
    return e


# ---------------------------------------------------------------------------
# Compute
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """A named loop axis with its extent."""

    name: str
    extent: int


@dataclass(frozen=True)
class TensorType:
    """Shape and dtype of a Compute input."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes of the whole tensor."""
        return math.prod(self.shape) * dtype(self.dtype).nbytes


REDUCE_OPS = {"sum", "max", "min", "prod"}

ACC = "acc"


@dataclass(frozen=True)
class Compute:
    """out[axes] = post(reduce_{reduce_axes} body)  (or just body without reduce axes).

    `post`, if given, is applied to the accumulator (`Var("acc")` of the
    accumulator dtype) after the reduction and may also use spatial axes and
    loads; it is how mean = sum / n and fused epilogues are written.
    `label` names the operator pattern (e.g. "MatMul+Add+Relu") for people and
    for the cache's op-pattern column; it is part of the identity.

    `stages` make a fused group at cache level (Welder): Computes evaluated
    before this one, whose outputs never reach memory outside the kernel. Stage
    k reads the group's `inputs` and the earlier stages (its own `inputs` are
    those, in that order); this Compute's body and post read stage k as input
    `len(inputs) + k` (see `member_inputs`).
    """

    axes: tuple[Axis, ...]
    body: Expr
    inputs: tuple[TensorType, ...]
    dtype: str
    reduce_axes: tuple[Axis, ...] = ()
    reduce_op: str | None = None
    post: Expr | None = None
    label: str = ""
    stages: tuple[Compute, ...] = ()

    def __post_init__(self) -> None:
        # A reduce op over zero reduce axes is allowed (it is the identity);
        # reduce axes without an op are not.
        if self.reduce_axes and self.reduce_op is None:
            raise ValueError("reduce axes given without a reduce op")
        if self.reduce_op is not None and self.reduce_op not in REDUCE_OPS:
            raise ValueError(f"unknown reduce op {self.reduce_op!r}")
        names = [a.name for a in (*self.axes, *self.reduce_axes)]
        if len(set(names)) != len(names) or ACC in names:
            raise ValueError(f"axis names must be distinct and not {ACC!r}: {names}")
        for k, stage in enumerate(self.stages):
            if stage.stages or stage.inputs != self.member_inputs(k):
                raise ValueError(f"stage {k} must read the group's inputs and the stages before it")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.extent for a in self.axes)

    @property
    def nbytes(self) -> int:
        """Bytes of the whole output."""
        return math.prod(self.shape) * dtype(self.dtype).nbytes

    @property
    def acc_dtype(self) -> str:
        """The dtype the reduction accumulates in (the body's)."""
        return self.body.dtype

    @property
    def is_reduction(self) -> bool:
        return self.reduce_op is not None

    def all_axes(self) -> tuple[Axis, ...]:
        return (*self.axes, *self.reduce_axes)

    @cached_property
    def loads(self) -> tuple[Load, ...]:
        """Every load in body and post, in walk order (`loads_of`). Kept on the instance: the
        cost model asks for the loads of one Compute at every tile it prices, and a fused
        body (a Winograd transform's select chain) is thousands of nodes to walk."""
        out = [x for x in walk(self.body) if isinstance(x, Load)]
        if self.post is not None:
            out += [x for x in walk(self.post) if isinstance(x, Load)]
        return tuple(out)

    @cached_property
    def distinct_loads(self) -> tuple[Load, ...]:
        """The loads, each distinct one once (first-seen order): what a region depends on."""
        return tuple(dict.fromkeys(self.loads))

    def member_inputs(self, k: int | None = None) -> tuple[TensorType, ...]:
        """What stage `k` (default: this Compute's own body) reads: the group's inputs, then
        the outputs of the stages before it."""
        before = self.stages if k is None else self.stages[:k]
        return (*self.inputs, *(TensorType(s.shape, s.dtype) for s in before))

    def members(self) -> tuple[Compute, ...]:
        """The stages, then this Compute on its own (reading `member_inputs()`): plain
        Computes that, run in order, compute the group."""
        if not self.stages:
            return (self,)
        return (*self.stages, replace(self, inputs=self.member_inputs(), stages=()))

    def flops(self, points: int | None = None) -> int:
        """Scalar operations per output element times outputs (a cost-model estimate);
        `points`: of the (output, reduce) points, those the body runs at (default all)."""
        per = max(1, count_ops(self.body)) + (1 if self.is_reduction else 0)
        if points is None:
            points = math.prod(self.shape) * math.prod(a.extent for a in self.reduce_axes)
        total = points * per
        if self.post is not None:
            total += math.prod(self.shape) * count_ops(self.post)
        return total + sum(s.flops() for s in self.stages)

    def canonical(self) -> str:
        """A deterministic serialization: equal strings iff the computations are identical."""
        return self._canonical

    @cached_property
    def _canonical(self) -> str:
        # made once per Compute (it is immutable): the cache keys, the prices' hashes and the
        # plan all ask for it, 578 times for ResNet-50's 250 Computes in a warm compile
        return json.dumps(to_json(self), sort_keys=True, separators=(",", ":"))


INIT: dict[str, Callable[[str], float | int | bool]] = {
    "sum": lambda dt: 0,
    "prod": lambda dt: 1,
    "max": lambda dt: -math.inf if dtype(dt).is_float else _int_bounds(dt)[0],
    "min": lambda dt: math.inf if dtype(dt).is_float else _int_bounds(dt)[1],
}


def _int_bounds(dt: str) -> tuple[int, int]:
    import numpy as np

    if dt == "bool":
        return (0, 1)
    info = np.iinfo(dtype(dt).np_type)
    return int(info.min), int(info.max)


# ---------------------------------------------------------------------------
# Traversal helpers
# ---------------------------------------------------------------------------


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Call):
        return e.args
    return ()


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order traversal of an expression tree."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(children(x)))


def expr_depth(e: Expr) -> int:
    """Levels of the expression tree (a leaf is 1), counted without recursion."""
    deepest, stack = 0, [(e, 1)]
    while stack:
        x, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children(x))
    return deepest


def count_ops(e: Expr) -> int:
    """Number of Calls in an expression, not counting index arithmetic."""
    return sum(1 for x in walk(e) if isinstance(x, Call) and x.dtype != INDEX)


def loads_of(c: Compute) -> list[Load]:
    """Every load in body and post."""
    return list(c.loads)


def substitute(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild `e` bottom-up-safe: `fn(node)` returns a replacement or None to recurse."""
    r = fn(e)
    if r is not None:
        return r
    if isinstance(e, Load):
        return Load(e.input, tuple(substitute(i, fn) for i in e.indices), e.dtype, e.pad)
    if isinstance(e, Call):
        args = tuple(substitute(a, fn) for a in e.args)
        return _simplify(Call(e.op, args, e.dtype))
    return e


def rename_vars(e: Expr, mapping: Mapping[str, Expr]) -> Expr:
    """Replace variables by expressions."""
    return substitute(e, lambda x: mapping.get(x.name) if isinstance(x, Var) else None)


def remap_loads(e: Expr, mapping: Mapping[int, int] | Sequence[int]) -> Expr:
    """`e` with every load of input k reading input `mapping[k]` instead."""

    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Load):
            return Load(mapping[x.input], tuple(remap_loads(i, mapping) for i in x.indices),
                        x.dtype, x.pad)
        return None

    return substitute(e, fn)


# ---------------------------------------------------------------------------
# Serialization
# ---------------------------------------------------------------------------


def expr_to_json(e: Expr) -> list:
    if isinstance(e, Var):
        return ["v", e.name, e.dtype]
    if isinstance(e, Const):
        v = e.value
        if isinstance(v, float) and not math.isfinite(v):
            v = repr(v)
        return ["c", v, e.dtype]
    if isinstance(e, Load):
        return ["l", e.input, [expr_to_json(i) for i in e.indices], e.dtype,
                e.pad if e.pad is None or math.isfinite(e.pad) else repr(e.pad)]
    if isinstance(e, Call):
        return ["f", e.op, [expr_to_json(a) for a in e.args], e.dtype]
    raise TypeError(f"not a TE expression: {e!r}")


def expr_from_json(j: list) -> Expr:
    kind = j[0]
    if kind == "v":
        return Var(j[1], j[2])
    if kind == "c":
        v = float(j[1]) if isinstance(j[1], str) else j[1]
        return Const(v, j[2])
    if kind == "l":
        pad = float(j[4]) if isinstance(j[4], str) else j[4]
        return Load(j[1], tuple(expr_from_json(i) for i in j[2]), j[3], pad)
    if kind == "f":
        return Call(j[1], tuple(expr_from_json(a) for a in j[2]), j[3])
    raise ValueError(f"bad TE json node {kind!r}")


def to_json(c: Compute) -> dict:
    """Compute -> plain JSON-able dict (stable field order and content)."""
    return {
        "axes": [[a.name, a.extent] for a in c.axes],
        "reduce_axes": [[a.name, a.extent] for a in c.reduce_axes],
        "reduce_op": c.reduce_op,
        "body": expr_to_json(c.body),
        "post": None if c.post is None else expr_to_json(c.post),
        "inputs": [[list(t.shape), t.dtype] for t in c.inputs],
        "dtype": c.dtype,
        "label": c.label,
        **({"stages": [to_json(s) for s in c.stages]} if c.stages else {}),
    }


def from_json(j: dict) -> Compute:
    """Inverse of `to_json`."""
    return Compute(
        axes=tuple(Axis(n, e) for n, e in j["axes"]),
        body=expr_from_json(j["body"]),
        inputs=tuple(TensorType(tuple(s), d) for s, d in j["inputs"]),
        dtype=j["dtype"],
        reduce_axes=tuple(Axis(n, e) for n, e in j["reduce_axes"]),
        reduce_op=j["reduce_op"],
        post=None if j["post"] is None else expr_from_json(j["post"]),
        label=j["label"],
        stages=tuple(from_json(s) for s in j.get("stages", ())),
    )


# ---------------------------------------------------------------------------
# Analyses: region, footprint, traffic
# ---------------------------------------------------------------------------

Interval = tuple[int, int]  # inclusive bounds


def interval_of(e: Expr, env: Mapping[str, Interval]) -> Interval | None:
    """Bounds of an integer expression over axis intervals; None = unknown (full extent)."""
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, Const):
        return (int(e.value), int(e.value))
    if isinstance(e, Load):
        return None
    if not isinstance(e, Call):
        return None
    if e.op == "cast":
        return interval_of(e.args[0], env) if not dtype(e.args[0].dtype).is_float else None
    if e.op == "select":
        a, b = interval_of(e.args[1], env), interval_of(e.args[2], env)
        return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    if e.op == "neg":
        a = interval_of(e.args[0], env)
        return None if a is None else (-a[1], -a[0])
    if e.op == "abs":
        a = interval_of(e.args[0], env)
        if a is None:
            return None
        lo = 0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1]))
        return (lo, max(abs(a[0]), abs(a[1])))
    if len(e.args) != 2:
        return None
    a, b = interval_of(e.args[0], env), interval_of(e.args[1], env)
    if a is None or b is None:
        return None
    if e.op == "add":
        return (a[0] + b[0], a[1] + b[1])
    if e.op == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if e.op == "mul":
        p = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        return (min(p), max(p))
    if e.op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if e.op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if e.op == "floordiv" and b[0] == b[1] and b[0] > 0:
        return (a[0] // b[0], a[1] // b[0])
    if e.op == "floormod" and b[0] == b[1] and b[0] > 0:
        if a[0] // b[0] == a[1] // b[0]:
            return (a[0] % b[0], a[1] % b[0])
        return (0, b[0] - 1)
    return None


@dataclass(frozen=True)
class Tile:
    """A tile: a size per axis (spatial and reduce), at a given origin (default 0)."""

    sizes: Mapping[str, int]
    origin: Mapping[str, int] = field(default_factory=dict)

    def interval(self, axis: Axis) -> Interval:
        start = self.origin.get(axis.name, 0)
        size = min(self.sizes.get(axis.name, axis.extent), axis.extent)
        return (start, min(start + size, axis.extent) - 1)


def full_tile(c: Compute) -> Tile:
    """The tile that covers the whole index space."""
    return Tile({a.name: a.extent for a in c.all_axes()})


def region_of(c: Compute, tile: Tile) -> list[list[Interval]]:
    """For each input, the box (per-dim inclusive intervals) of elements one tile reads.

    Interval bounds of each index expression, clipped to the tensor; a
    non-affine (data-dependent) index reads the full extent. Inputs never
    loaded get an empty-extent box.
    """
    env = {a.name: tile.interval(a) for a in c.all_axes()}
    boxes: list[list[Interval] | None] = [None] * len(c.inputs)
    for ld in c.distinct_loads:
        shape = c.inputs[ld.input].shape
        box = []
        for d, idx in enumerate(ld.indices):
            iv = interval_of(idx, env)
            n = shape[d]
            if iv is None:
                box.append((0, n - 1))
            else:
                lo, hi = max(iv[0], 0), min(iv[1], n - 1)
                box.append((lo, hi) if lo <= hi else (0, -1))
        prev = boxes[ld.input]
        boxes[ld.input] = box if prev is None else [
            (min(p[0], q[0]), max(p[1], q[1])) if q[0] <= q[1] else p for p, q in zip(prev, box, strict=True)
        ]
    return [b if b is not None else [(0, -1)] * len(c.inputs[i].shape) for i, b in enumerate(boxes)]


def _extent(box: Sequence[Interval]) -> list[int]:
    return [max(0, hi - lo + 1) for lo, hi in box]


def footprint(c: Compute, tile: Tile) -> int:
    """Bytes a tile holds at one memory level: every input region plus the output tile."""
    total = 0
    for t, box in zip(c.inputs, region_of(c, tile), strict=True):
        total += math.prod(_extent(box)) * dtype(t.dtype).nbytes
    out = math.prod(tile.interval(a)[1] - tile.interval(a)[0] + 1 for a in c.axes)
    return total + out * dtype(c.dtype).nbytes


def num_tiles(c: Compute, tile: Tile) -> int:
    """Number of tiles that cover the spatial index space (reduce axes are not split across tiles)."""
    return math.prod(-(-a.extent // max(1, tile.sizes.get(a.name, a.extent))) for a in c.axes)


def box_bytes(shape: Sequence[int], box: Sequence[Interval], elem: int, transaction: int) -> int:
    """Bytes moved to read a box of a row-major tensor, in whole transactions.

    Coalescing: trailing dims the box covers fully merge into one contiguous
    run; the run is rounded up to whole transactions and repeated for every
    combination of the remaining (outer) indices.
    """
    ext = _extent(box)
    if not ext:
        return elem
    if 0 in ext:
        return 0
    run = 1
    d = len(ext) - 1
    while d >= 0:
        run *= ext[d]
        if ext[d] != shape[d]:
            break
        d -= 1
    rows = math.prod(ext[:d]) if d > 0 else 1
    run_bytes = run * elem
    return rows * (-(-run_bytes // transaction)) * transaction


@dataclass(frozen=True)
class Traffic:
    """Memory traffic of a tiling: per tile, tile count, and total bytes."""

    per_tile: int
    tiles: int

    @property
    def total(self) -> int:
        return self.per_tile * self.tiles


def traffic(c: Compute, tile: Tile, transaction: int = 64) -> Traffic:
    """Bytes moved between the outer memory level and a tile, whole-transaction granular.

    Reads: each input's region of the tile; writes: the output tile (written once,
    after the full reduction).
    """
    per = 0
    for t, box in zip(c.inputs, region_of(c, tile), strict=True):
        per += box_bytes(t.shape, box, dtype(t.dtype).nbytes, transaction)
    out_box = [tile.interval(a) for a in c.axes]
    per += box_bytes(c.shape, out_box, dtype(c.dtype).nbytes, transaction)
    return Traffic(per, num_tiles(c, tile))
