"""Explicit SIMD for the general CPU micro-tile: expressions as GCC vectors along one axis.

The general path (c.py) otherwise keeps a micro-tile's accumulators in an array
that gcc vectorizes loop by loop; with the reduce loops outside the micro-tile
loops, gcc stores that array back to the stack after every multiply-add (the array
is memory to it), so a depthwise convolution ran at store bandwidth. With this, the
accumulators are named vector variables, one per row and vector of the micro-tile,
which gcc keeps in registers for the whole reduction, as in the GEMM micro-kernel.

An expression qualifies when every value that varies along the vector axis (or is
an accumulator) is built from loads that walk memory contiguously along it, or every
other element (stride 1 or 2, no padding: padded windows are staged first, see
c/stage.py; a stride-2 vector is two loads and one lane shuffle), by float add, sub,
mul, div, neg, max, min, selects (on comparisons of such values, of integer index expressions
affine along it, or on a condition the same in every lane), and float32 exp, tanh,
erf and log (inlined, c/vector_math.py and c/vector_functions.py). Values that do not vary along it (a depthwise filter
tap, a bias) are rendered as scalars and broadcast.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

from compiler.codegen.c.vector_functions import (
    VECTOR_FUNCTIONS,
    vector_definitions,
    vector_function,
)
from compiler.codegen.cexpr import ExprWriter, flat_offset, value_ctype
from compiler.ir.affine import linear_form, load_stride
from compiler.ir.contraction import expr_vars, plain_load
from compiler.ir.dtypes import dtype
from compiler.ir.te import Call, Expr, Load, TensorType, Var

VECTOR_TYPE = "tf_v"
VECTOR_STRIDES = (1, 2)  # elements between a vector's lanes in the loads it reads
MASK_TYPE = "tf_vm"  # the integer vector a comparison of two VECTOR_TYPEs gives
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_MASK_CTYPE = {"float32": "int32_t", "float64": "int64_t"}


def vector_typedefs(dt: str, lanes: int) -> list[str]:
    """C typedefs of `VECTOR_TYPE` (`lanes` values of `dt`, loadable from any element
    address) and of its comparison mask `MASK_TYPE`."""
    size, align = lanes * dtype(dt).nbytes, dtype(dt).nbytes
    return [f"typedef {value_ctype(dt)} {VECTOR_TYPE} __attribute__((vector_size({size}), aligned({align}), may_alias));",
            f"typedef {_MASK_CTYPE[dt]} {MASK_TYPE} __attribute__((vector_size({size})));"]


def lane_rotations(var: str, lanes: int) -> list[str]:
    """`var` (a `VECTOR_TYPE` of `lanes` lanes) rotated by half its lanes, then a quarter,
    down to one: folding `var` with each in turn leaves the fold of all its lanes in every
    lane, in log2(lanes) shuffles and folds instead of a chain of `lanes` scalar ones (an
    LSTM step's 1024 x 256 row-dot: 16 lane extracts and adds per output, on the ports its
    FMAs need)."""
    out, width = [], lanes // 2
    while width:
        rotated = ", ".join(str((k + width) % lanes) for k in range(lanes))
        out.append(f"__builtin_shuffle({var}, ({MASK_TYPE}){{{rotated}}})")
        width //= 2
    return out


def splat(value: str, lanes: int) -> str:
    """A `VECTOR_TYPE` literal holding C scalar expression `value` in each of `lanes` lanes."""
    return f"({VECTOR_TYPE}){{{', '.join([value] * lanes)}}}"


def transpose_lines(rows: Sequence[str], lanes: int) -> list[str]:
    """C statements transposing in place the `lanes` x `lanes` block whose rows are the
    `VECTOR_TYPE` variables `rows`: log2(lanes) stages, each swapping the off-diagonal
    blocks of every 2h x 2h block with two-vector shuffles (h = lanes / 2, ..., 1)."""
    lines, h = [], lanes // 2
    while h:
        lo = ", ".join(str(c if not c & h else lanes + c - h) for c in range(lanes))
        hi = ", ".join(str(c + h if not c & h else lanes + c) for c in range(lanes))
        for i in (i for i in range(lanes) if not i & h):
            a, b = rows[i], rows[i + h]
            lines.append(f"{{ const {VECTOR_TYPE} t = __builtin_shuffle({a}, {b}, ({MASK_TYPE}){{{lo}}}); "
                         f"{b} = __builtin_shuffle({a}, {b}, ({MASK_TYPE}){{{hi}}}); {a} = t; }}")
        h //= 2
    return lines


def interleave_lines(vectors: Sequence[str], lanes: int) -> list[str]:
    """C statements interleaving the `VECTOR_TYPE` variables `vectors` (a power of two of
    them, at most `lanes`) in place: afterwards they hold, in order, v0[0], v1[0], ...,
    v0[1], v1[1], ... (log2 of their count rounds of two-vector zips, a perfect shuffle,
    after which each result is back in its own variable's place)."""
    lines, half = [], lanes // 2
    lo = ", ".join(str(k // 2 + (lanes if k % 2 else 0)) for k in range(lanes))
    hi = ", ".join(str(half + k // 2 + (lanes if k % 2 else 0)) for k in range(lanes))
    order = list(vectors)
    for _ in range(len(vectors).bit_length() - 1):
        pairs = [(order[k], order[k + len(order) // 2]) for k in range(len(order) // 2)]
        zipped: list[str] = []
        for a, b in pairs:
            lines.append(f"{{ const {VECTOR_TYPE} t = __builtin_shuffle({a}, {b}, ({MASK_TYPE}){{{lo}}}); "
                         f"{b} = __builtin_shuffle({a}, {b}, ({MASK_TYPE}){{{hi}}}); {a} = t; }}")
            zipped += [a, b]
        order = zipped
    return lines


def vectorizes(e: Expr, var: str, inputs: Sequence[TensorType], dt: str,
               vector_values: Collection[str] = ()) -> bool:
    """Whether `VectorWriter` can render `e` as vectors of `dt` along variable `var`
    (`vector_values`: names of variables that hold vectors, like the accumulator)."""
    if dt not in _MASK_CTYPE:
        return False
    if not expr_vars(e) & {var, *vector_values}:
        return True
    if e.dtype != dt and not _is_comparison(e):
        return False
    if isinstance(e, Var):
        return e.name in vector_values
    if isinstance(e, Load):
        return plain_load(e) is e and e.pad is None and load_stride(e, inputs[e.input].shape, var) in VECTOR_STRIDES
    if not isinstance(e, Call):
        return False
    if _is_comparison(e):
        if _lane_step(e, var) is not None:
            return True
        return e.args[0].dtype == dt and e.args[1].dtype == dt and all(
            vectorizes(a, var, inputs, dt, vector_values) for a in e.args)
    if e.op == "select":
        steady = not expr_vars(e.args[0]) & {var, *vector_values}  # one condition for every lane
        return (steady or _is_comparison(e.args[0])) and all(
            vectorizes(a, var, inputs, dt, vector_values) for a in e.args)
    if (e.op in _ARITH or e.op in {"neg", "max", "min"} or (e.op == "cast" and e.args[0].dtype == dt)
            or (e.op in VECTOR_FUNCTIONS and dt == "float32")):
        return all(vectorizes(a, var, inputs, dt, vector_values) for a in e.args)
    return False


def _is_comparison(e: Expr) -> bool:
    return isinstance(e, Call) and e.op in _CMP


def _lane_step(e: Call, var: str) -> int | None:
    """For a comparison of integer index expressions whose difference is affine with constant
    coefficients (a causal mask: key > query + offset), how much the difference grows from
    one lane to the next; None for any other comparison."""
    if dtype(e.args[0].dtype).is_float or e.args[0].dtype == "bool":
        return None
    form = linear_form(Call("sub", e.args, e.args[0].dtype))
    return None if form is None else form[1].get(var, 0)


class VectorWriter(ExprWriter):
    """Renders an expression's values at `var`, `var` + 1, ... as one `VECTOR_TYPE` value
    (`names[var]` is the first lane's index; `names` also binds each of `vector_values`
    to a vector). Parts that vary along neither are rendered as scalars. `definitions`
    collects the file-scope C that the rendered lines call (for `CSource.define`)."""

    def __init__(self, inputs: Sequence[TensorType], names: Mapping[str, str], counter: Iterator[int],
                 var: str, lanes: int, vector_values: Collection[str] = ()) -> None:
        super().__init__(inputs, names, counter)
        self.var, self.lanes = var, lanes
        self.varying = {var, *vector_values}
        self._vectors: dict[int, tuple[Expr, str]] = {}  # shared subexpressions, rendered once
        self.definitions: dict[str, list[str]] = {}

    def emit_vector(self, e: Expr) -> str:
        """The C expression of `e` along the vector axis (a scalar where `e` does not vary)."""
        if not expr_vars(e) & self.varying:
            return self.emit(e)
        if isinstance(e, Var):
            return self.names[e.name]
        hit = self._vectors.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = self._render(e)
        self._vectors[id(e)] = (e, out)
        return out

    def _render(self, e: Expr) -> str:
        if isinstance(e, Load):
            shape = self.inputs[e.input].shape
            address = f"in{e.input} + {flat_offset(shape, [self.emit(i) for i in e.indices])}"
            if load_stride(e, shape, self.var) == 1:
                return self._vector(f"*(const {VECTOR_TYPE}*)({address})")
            # every other element: lanes 0, 2, ... of one vector and, from a second one that
            # ends on the last element read (never past it), the rest
            first = self._vector(f"*(const {VECTOR_TYPE}*)({address})")
            second = self._vector(f"*(const {VECTOR_TYPE}*)({address} + {self.lanes - 1}L)")
            half = self.lanes // 2
            picks = [2 * j for j in range(half)] + [self.lanes + 2 * j + 1 for j in range(self.lanes - half)]
            return self._vector(f"__builtin_shuffle({first}, {second}, ({MASK_TYPE}){{{', '.join(map(str, picks))}}})")
        assert isinstance(e, Call), e
        if e.op == "select":
            return self._select(self._mask(e.args[0]), self._whole(e.args[1]), self._whole(e.args[2]))
        if e.op in {"max", "min"}:
            return self._extreme(e.op, *(self._whole(x) for x in e.args))
        args = [self.emit_vector(a) for a in e.args]
        if e.op == "cast":
            return args[0]
        if e.op == "neg":
            return self._vector(f"-{args[0]}")
        if e.op in VECTOR_FUNCTIONS:
            self.definitions.update(vector_definitions(e.op, self.lanes))
            return self._vector(f"{vector_function(e.op, self.lanes)}({args[0]})")
        return self._vector(f"{args[0]} {_ARITH[e.op]} {args[1]}")

    def fold(self, op: str, acc: str, value: str) -> str:
        """The vector folding vector `value` into accumulator vector `acc` for reduce op
        `op` (sum, prod, or max / min propagating NaN like the scalar `combine`)."""
        if op in {"sum", "prod"}:
            return self._vector(f"{acc} {'+' if op == 'sum' else '*'} {value}")
        return self._extreme(op, value, acc)

    def _extreme(self, op: str, a: str, b: str) -> str:
        """Lane-wise max / min of vectors `a` and `b`, NaN where `a` is NaN (else b's NaN
        comes through the compare), like the scalar rendering."""
        rel = ">" if op == "max" else "<"
        return self._select(f"({a} {rel} {b}) | ({a} != {a})", a, b)

    def _whole(self, e: Expr) -> str:
        """`e` as a vector, a scalar broadcast to every lane where it does not vary."""
        value = self.emit_vector(e)
        if expr_vars(e) & self.varying:
            return value
        return self._vector(splat(value, self.lanes))

    def _mask(self, e: Expr) -> str:
        if not expr_vars(e) & self.varying:  # the same in every lane: all ones or all zeros
            flag = f"t{next(self.counter)}"
            self.lines.append(f"const int64_t {flag} = -(int64_t)({self.emit(e)});")
            return f"({MASK_TYPE}){{{', '.join([flag] * self.lanes)}}}"
        assert isinstance(e, Call), e
        step = _lane_step(e, self.var)
        if step is not None:
            return self._index_mask(e, step)
        a, b = (self._whole(x) for x in e.args)
        return f"({a} {_CMP[e.op]} {b})"

    def _index_mask(self, e: Call, step: int) -> str:
        """Integer comparison `e`, whose two sides differ by d + `step` * lane, as lane indices
        times `step` against -d (clamped to where it cannot change the outcome: lane
        indices times `step` stay far inside it)."""
        d = self.emit(Call("sub", e.args, e.args[0].dtype))
        far = 1 << 30
        bound = f"t{next(self.counter)}"
        self.lines.append(f"const int64_t {bound} = -({d}) < -{far}L ? -{far}L : -({d}) > {far}L ? {far}L : -({d});")
        lanes = ", ".join(str(step * k) for k in range(self.lanes))
        return f"(({MASK_TYPE}){{{lanes}}} {_CMP[e.op]} ({MASK_TYPE}){{{', '.join([bound] * self.lanes)}}})"

    def _select(self, mask: str, a: str, b: str) -> str:
        m = f"t{next(self.counter)}"
        self.lines.append(f"const {MASK_TYPE} {m} = {mask};")
        return self._vector(f"({VECTOR_TYPE})(({m} & ({MASK_TYPE}){a}) | (~{m} & ({MASK_TYPE}){b}))")

    def _vector(self, value: str) -> str:
        name = f"t{next(self.counter)}"
        self.lines.append(f"const {VECTOR_TYPE} {name} = {value};")
        return name
