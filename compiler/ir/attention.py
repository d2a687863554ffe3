"""Attention as a fused group: softmax(score(Q K)) V with the scores never stored.

The group (compiler/schedule/tilegraph/attention.py builds it) is a Compute with five
stages, as the frontend lowers the chain and register fusion connects it:
  S[b.., i, j] = score(sum_r Q[.., i, r] * K[.., j, r])   scale and mask in S's post
  M[b.., i]    = max_j S                                   (softmax, as lowered)
  E[b.., i, j] = exp(S - M)
  Z[b.., i]    = sum_j E          (post 1 / acc, or none)
  P[b.., i, j] = E * Z            (or E / Z; maybe where(isnan(P), 0, P), torch's SDPA)
  O[b.., i, d] = sum_j P[b.., i, j] * V[.., j, d]          the group's own Compute
`match_attention` recognises it and names the parts a renderer needs, so the fusion pass
and the CPU renderer (compiler/codegen/c/attention.py) always agree on what is one.
Every operand row is contiguous (Q's and V's last index the head / value axis, K's the
head axis or, transposed, the key axis), the other of its two axes at any one dimension
(heads still interleaved in a projection's output are read in place); the remaining
indices may be any expressions of the batch axes (a key / value head shared by several
query heads reads it by index). A score that masks every key past the query's diagonal
with a large negative value (a causal mask, as compiler/schedule/tilegraph/masks.py
writes a constant one) is named too: the kernel skips what it masks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.ir.affine import linear_form
from compiler.ir.contraction import expr_vars
from compiler.ir.te import ACC, Call, Compute, Const, Expr, Load, Var, rename_vars, walk

_STAGES = 5
# An additive mask's fill at most this: a masked score (the fill plus the score, assumed
# at most half the fill in magnitude: a finite dot product) is at most half the fill.
_ADDITIVE_FILL = -1e30


@dataclass(frozen=True)
class Causal:
    """Key j is masked for query i where j > i + `offset`: its score is then at most `bound`;
    `unmasked` is the score where it is not."""

    offset: int
    unmasked: Expr
    bound: float


@dataclass(frozen=True)
class Attention:
    """The parts of an attention group. Variables: the batch axes `b0`, `b1`, .., the query
    `i`, the key `j`, the head `r` and value `d` axes. `q` reads (.., i, r), `k` (.., j, r)
    or, `k_transposed`, (.., r, j), `v` (.., j, d); `score` is one score from `acc` (the
    product Q K) and loads of the group's inputs (the mask)."""

    batch: tuple[int, ...]  # extents of the batch axes
    queries: int
    keys: int
    head_dim: int
    value_dim: int
    q: Load
    k: Load
    v: Load
    k_transposed: bool
    score: Expr
    out_axes: tuple[str, ...]  # the output's axes: the batch names and "i" in any order, then "d"
    nan_to_zero: bool  # a row whose probabilities are NaN (all its scores -inf) comes out 0
    causal: Causal | None  # the score's causal mask, where it has one


def batch_names(n: int) -> list[str]:
    """The names of `n` batch axes in an `Attention`'s expressions."""
    return [f"b{x}" for x in range(n)]


def match_attention(c: Compute) -> Attention | None:
    """The parts of attention group `c`, or None when it is not one (float32 only)."""
    if len(c.stages) != _STAGES or any(m.dtype != "float32" for m in c.members()):
        return None
    s, top, exps, total, probs = c.stages
    n = len(s.axes)
    if n < 2 or len(c.axes) != n or c.post is not None or 0 in (*s.shape, *c.shape, *(a.extent for a in s.reduce_axes)):
        return None
    names = {a.name: Var(v) for a, v in zip(s.axes, [*batch_names(n - 2), "i", "j"], strict=True)}
    qk = _product(s, len(c.inputs), names, "i", "j")
    nan_to_zero = _softmax(c, s, top, exps, total, probs)
    if qk is None or nan_to_zero is None:
        return None
    o = c.members()[-1]
    out_axes = _output_axes(o, s, len(c.inputs) + _STAGES - 1)
    if out_axes is None:
        return None
    o_names = {a.name: Var(x) for a, x in zip(o.axes, out_axes, strict=True)}
    pv = _product(o, len(c.inputs) + _STAGES, o_names, "i", "d")
    if pv is None or pv[0].input != len(c.inputs) + _STAGES - 1 or pv[1].input >= len(c.inputs):
        return None
    q, k, k_transposed = qk
    _, v, v_transposed = pv
    score = _plus_zero_dropped(rename_vars(s.post, names)) if s.post is not None else Var(ACC, "float32")
    # V walks d contiguously: in the product's terms, "transposed"
    if not v_transposed:
        return None
    v = Load(v.input, tuple(rename_vars(x, {"r": Var("j")}) for x in v.indices), v.dtype, v.pad)
    return Attention(s.shape[:-2], s.shape[-2], s.shape[-1], s.reduce_axes[0].extent,
                     c.shape[-1], q, k, v, k_transposed, score, out_axes, nan_to_zero, _causal(score))


def _plus_zero_dropped(score: Expr) -> Expr:
    """`score` without an added 0 (a constant mask of zeros, compiler/schedule/tilegraph/
    masks.py): it changes at most a zero's sign, which no probability sees."""
    if isinstance(score, Call) and score.op == "add":
        zero = Const(0.0, "float32")
        if zero in score.args:
            return _plus_zero_dropped(score.args[1] if score.args[0] == zero else score.args[0])
    return score


def _causal(score: Expr) -> Causal | None:
    """The causal mask of `score`: select(j > i + o, fill, x), select(j <= i + o, x, fill),
    or x + select(j > i + o, fill, 0) with fill a very large negative constant."""
    if isinstance(score, Call) and score.op == "select":
        cond, a, b = score.args
        later = _later(cond)
        if later is not None and later[0] == "gt" and isinstance(a, Const):
            return Causal(later[1], b, float(a.value))
        if later is not None and later[0] == "le" and isinstance(b, Const):
            return Causal(later[1], a, float(b.value))
    if isinstance(score, Call) and score.op == "add":
        for x, m in (score.args, score.args[::-1]):
            if not (isinstance(m, Call) and m.op == "select" and m.args[2] == Const(0.0, "float32")):
                continue
            later, fill = _later(m.args[0]), m.args[1]
            if later is not None and later[0] == "gt" and isinstance(fill, Const) and fill.value <= _ADDITIVE_FILL:
                return Causal(later[1], x, float(fill.value) / 2)
    return None


def _later(cond: Expr) -> tuple[str, int] | None:
    """(op, o) where `cond` is j `op` i + o, op "gt" or "le"."""
    if not (isinstance(cond, Call) and cond.op in {"gt", "le"} and cond.args[0] == Var("j")):
        return None
    form = linear_form(cond.args[1])
    return (cond.op, form[0]) if form is not None and form[1] == {"i": 1} else None


def _output_axes(o: Compute, s: Compute, slot: int) -> tuple[str, ...] | None:
    """The names of output `o`'s axes (batch names, "i", and "d" last) from where it reads
    the probabilities P[b.., i, j] at input `slot`; None unless it reads them at its own
    axes, in any order (the heads merged back by a transpose folded in), "d" last."""
    loads = [x for x in walk(o.body) if isinstance(x, Load) and x.input == slot]
    if len(loads) != 1 or len(loads[0].indices) != len(s.axes) or o.shape[-1] == 0:
        return None
    rows = [*batch_names(len(s.axes) - 2), "i"]
    named: dict[str, str] = {}
    unit = []  # row axes of extent 1 that P reads at index 0: any output axis of extent 1 is one
    for x, name, extent in zip(loads[0].indices[:-1], rows, s.shape[:-1], strict=True):
        if isinstance(x, Var) and x.name not in named:
            named[x.name] = name
        elif x == Const(0, x.dtype) and extent == 1:
            unit.append(name)
        else:
            return None
    out = []
    for a in o.axes[:-1]:
        if a.name in named:
            out.append(named[a.name])
        elif a.extent == 1 and unit:
            out.append(unit.pop())
        else:
            return None
    return (*out, "d") if o.axes[-1].name not in named and sorted(out) == sorted(rows) else None


def _product(m: Compute, inputs: int, names: dict[str, Var], row: str,
             col: str) -> tuple[Load, Load, bool] | None:
    """For `m` = sum_r x * y over one reduce axis: (the load by `row`, the load by `col`,
    whether the second walks `col` rather than `r` contiguously), renamed, the reduce axis
    to `r`; None otherwise. The first walks `r` contiguously; each reads its two axes at
    one dimension each, its other dimensions at the batch axes only."""
    if m.reduce_op != "sum" or len(m.reduce_axes) != 1 or m.acc_dtype != "float32":
        return None
    if not (isinstance(m.body, Call) and m.body.op == "mul"):
        return None
    renamed = {**names, m.reduce_axes[0].name: Var("r")}
    loads = [rename_vars(a, renamed) for a in m.body.args]
    if not all(isinstance(x, Load) and x.pad is None and x.dtype == "float32" and x.input < inputs for x in loads):
        return None
    by_row = [x for x in loads if row in expr_vars(x)]
    by_col = [x for x in loads if col in expr_vars(x)]
    if len(by_row) != 1 or len(by_col) != 1 or by_row[0] is by_col[0]:
        return None
    x, y = by_row[0], by_col[0]
    batch = set(batch_names(len(m.axes) - 2))
    if not (_rows_of(x, batch, row, "r") and (_rows_of(y, batch, col, "r") or _rows_of(y, batch, "r", col))):
        return None
    return x, y, col in expr_vars(y.indices[-1])


def _rows_of(ld: Load, batch: set[str], row: str, col: str) -> bool:
    """Whether `ld` reads `col` contiguously (its last index, maybe plus an offset of the
    batch axes), `row` at one other dimension, and every other dimension at an expression
    of the `batch` axes alone."""
    if len(ld.indices) < 2 or ld.indices[:-1].count(Var(row)) != 1:
        return False
    last = ld.indices[-1]
    # the column may start at an offset of the batch axes: a head's slice of a projection
    offset = [a for a in last.args if a != Var(col)] if isinstance(last, Call) and last.op == "add" else []
    if last != Var(col) and len(offset) != 1:
        return False
    rest = [e for e in ld.indices[:-1] if e != Var(row)] + offset
    return all(expr_vars(e) <= batch and not any(isinstance(x, Load) for x in walk(e)) for e in rest)


def row_stride(ld: Load, shape: tuple[int, ...], var: str) -> int:
    """Elements between consecutive `var` in load `ld` of a row-major tensor of `shape`
    (`var` indexes one dimension, as in an `Attention`'s loads)."""
    return math.prod(shape[ld.indices.index(Var(var)) + 1:])


def _at(m: Compute, slot: int, axes: int, extra: str | None = None) -> Load:
    """The load of `slot` at `m`'s first `axes` axes (then reduce axis `extra`)."""
    idx = [Var(a.name) for a in m.axes[:axes]] + ([Var(extra)] if extra else [])
    return Load(slot, tuple(idx), "float32")


def _unit_free(m: Compute, e: Expr) -> Expr:
    """`e` with `m`'s axes of extent 1 written as index 0 (how broadcasting lowers them), so
    that expressions compare equal whichever way they index such an axis."""
    zero = {a.name: Const(0, "int64") for a in m.all_axes() if a.extent == 1}
    return rename_vars(e, zero) if zero else e


def _softmax(c: Compute, s: Compute, top: Compute, exps: Compute, total: Compute,
             probs: Compute) -> bool | None:
    """None unless stages 1 to 4 are the frontend's softmax over S's last axis (the sink
    reading its probabilities); else whether the probabilities of a row that came out NaN
    are made 0 (`where(isnan(p), 0, p)`, as torch's SDPA decomposition writes)."""
    base, n = len(c.inputs), len(s.axes)
    rows = s.shape[:-1]
    reduced = all(m.shape == rows and len(m.reduce_axes) == 1 and m.reduce_axes[0].extent == s.shape[-1]
                  for m in (top, total))
    if not reduced or exps.shape != s.shape or probs.shape != s.shape or exps.is_reduction or probs.is_reduction:
        return None
    if top.reduce_op != "max" or top.post is not None or not _same(top, top.body, _at(top, base, n - 1, top.reduce_axes[0].name)):
        return None
    shifted = Call("sub", (_at(exps, base, n), _at(exps, base + 1, n - 1)), "float32")
    if exps.post is not None or not _same(exps, exps.body, Call("exp", (shifted,), "float32")):
        return None
    if total.reduce_op != "sum" or not _same(total, total.body, _at(total, base + 2, n - 1, total.reduce_axes[0].name)):
        return None
    e, z = _at(probs, base + 2, n), _at(probs, base + 3, n - 1)
    inverse = Call("div", (Const(1.0, "float32"), Var(ACC, "float32")), "float32")
    if total.post == inverse:
        forms = [Call("mul", (e, z), "float32"), Call("mul", (z, e), "float32")]
    elif total.post is None:
        forms = [Call("div", (e, z), "float32")]
    else:
        return None
    body = probs.body
    if probs.post is not None:
        return None
    if any(_same(probs, body, f) for f in forms):
        return False
    nan_to_zero = (isinstance(body, Call) and body.op == "select" and body.args[1] == Const(0.0, "float32")
                   and body.args[0] == Call("isnan", (body.args[2],), "bool"))
    return True if nan_to_zero and any(_same(probs, body.args[2], f) for f in forms) else None


def _same(m: Compute, a: Expr, b: Expr) -> bool:
    """Whether `a` and `b` compute the same in member `m` (axes of extent 1 aside)."""
    return _unit_free(m, a) == _unit_free(m, b)
