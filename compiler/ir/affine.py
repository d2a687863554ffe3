"""Affine index expressions: their linear form, per-axis strides and value bounds.

Codegen reads these to pick a loop structure (which axis walks memory
contiguously) and to drop bounds checks that can never fail; the scheduler, to lay
out a convolution's patches read in place (compiler/schedule/in_place.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compiler.ir.dtypes import dtype
from compiler.ir.te import Call, Const, Expr, Load, Var

LinearForm = tuple[int, dict[str, int]]  # constant, coefficient per variable


def linear_form(e: Expr) -> LinearForm | None:
    """`e` as constant + sum(coef * var) when it is affine with constant coefficients, else None."""
    if isinstance(e, Const):
        return int(e.value), {}
    if isinstance(e, Var):
        return 0, {e.name: 1}
    if not isinstance(e, Call):
        return None
    if e.op == "cast" and not dtype(e.args[0].dtype).is_float:
        return linear_form(e.args[0])
    parts = [linear_form(a) for a in e.args]
    if any(p is None for p in parts):
        return None
    if e.op == "neg":
        c, coefs = parts[0]  # type: ignore[misc]
        return -c, {v: -k for v, k in coefs.items()}
    if e.op in {"add", "sub"}:
        (c0, k0), (c1, k1) = parts  # type: ignore[misc]
        sign = 1 if e.op == "add" else -1
        coefs = dict(k0)
        for v, k in k1.items():
            coefs[v] = coefs.get(v, 0) + sign * k
        return c0 + sign * c1, {v: k for v, k in coefs.items() if k}
    if e.op == "mul":
        (c0, k0), (c1, k1) = parts  # type: ignore[misc]
        if k0 and k1:
            return None
        scale, (c, coefs) = (c1, (c0, k0)) if not k1 else (c0, (c1, k1))
        return c * scale, {v: k * scale for v, k in coefs.items() if k * scale}
    return None


def load_stride(load: Load, shape: Sequence[int], var: str) -> int | None:
    """Elements the load's flat address moves when `var` grows by one (None: not affine)."""
    total, stride = 0, 1
    for idx, n in zip(reversed(load.indices), reversed(shape), strict=True):
        form = linear_form(idx)
        if form is None:
            return None
        total += form[1].get(var, 0) * stride
        stride *= n
    return total


def bounds(e: Expr, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int] | None:
    """Inclusive [min, max] of an affine `e` over variables in `ranges` (None if unknown)."""
    form = linear_form(e)
    if form is None or any(v not in ranges for v in form[1]):
        return None
    return form_bounds(form, ranges)


def form_bounds(form: LinearForm, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """Inclusive [min, max] of a linear form over the variables' `ranges`."""
    lo = hi = form[0]
    for v, k in form[1].items():
        a, b = ranges[v]
        lo += min(k * a, k * b)
        hi += max(k * a, k * b)
    return lo, hi


def row_major_strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a dense row-major tensor."""
    strides, s = [], 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return strides[::-1]
