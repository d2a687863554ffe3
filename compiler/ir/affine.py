"""Affine index expressions: their linear form, per-axis strides and value bounds.

Codegen reads these to pick a loop structure (which axis walks memory
contiguously) and to drop bounds checks that can never fail; the scheduler, to lay
out a convolution's patches read in place (compiler/schedule/in_place.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from compiler.ir.contraction import expr_vars
from compiler.ir.dtypes import dtype
from compiler.ir.te import Call, Compute, Const, Expr, Load, Var, walk

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
    """Elements the load's flat address moves when `var` grows by one (None: an index that
    involves `var` is not affine in it). An index without `var` moves nothing, affine or not:
    a nearest-neighbour upsampling's row `h // 2` leaves its columns contiguous."""
    total, stride = 0, 1
    for idx, n in zip(reversed(load.indices), reversed(shape), strict=True):
        form = linear_form(idx)
        if form is None:
            if var in expr_vars(idx):
                return None
        else:
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


# Variables that constrain each other are counted together, over at most this many points.
MAX_JOINT_POINTS = 1 << 22


def in_bounds_points(c: Compute) -> int | None:
    """How many (output, reduce) points of reduction `c` read every padded load of its body
    inside its tensor: the multiply-adds a kernel that skips a convolution's taps on its
    padding does (ASPP's 3x3 at dilation 18 on a 32 x 32 map reads the map in 39% of its
    taps). Each index of a padded load must be affine; variables tied by one index are
    counted together by enumeration. None where that does not hold or is too large."""
    extents = {a.name: a.extent for a in c.all_axes()}
    constraints: list[tuple[int, dict[str, int], int]] = []  # constant, coefficients, size
    for ld in (x for x in walk(c.body) if isinstance(x, Load) and x.pad is not None):
        for idx, size in zip(ld.indices, c.inputs[ld.input].shape, strict=True):
            form = linear_form(idx)
            if form is None or any(v not in extents for v in form[1]):
                return None
            if not form[1]:
                if not 0 <= form[0] < size:
                    return 0
                continue
            constraints.append((form[0], form[1], size))
    # variables tied by a constraint, grouped (union by merging the groups each one touches)
    groups: list[set[str]] = []
    for _, coefs, _ in constraints:
        touched = [g for g in groups if g & coefs.keys()]
        merged = set(coefs).union(*touched)
        groups = [g for g in groups if g not in touched] + [merged]
    points = math.prod(e for v, e in extents.items() if not any(v in g for g in groups))
    for g in groups:
        names = sorted(g)
        if math.prod(extents[v] for v in names) > MAX_JOINT_POINTS:
            return None
        grids = np.meshgrid(*(np.arange(extents[v]) for v in names), indexing="ij", sparse=True)
        ok = np.ones([extents[v] for v in names], dtype=bool)
        for const, coefs, size in constraints:
            if set(coefs) <= g:
                value = const + sum(k * grids[names.index(v)] for v, k in coefs.items())
                ok &= (value >= 0) & (value < size)
        points *= int(ok.sum())
    return points
