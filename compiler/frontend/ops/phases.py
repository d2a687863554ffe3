"""Outputs computed per phase (output position mod stride along each spatial axis) and
interleaved into one tensor: a ConvTranspose's per-phase convolutions
(compiler/frontend/ops/conv_transpose.py)."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.frontend.exprs import compute, idx, load, out_index, scalar
from compiler.frontend.registry import OpContext
from compiler.frontend.values import Value
from compiler.ir.te import Expr, call, select


def interleave_phases(cx: OpContext, phases: dict[tuple[int, ...], Value], strides: Sequence[int],
                      shape: tuple[int, ...]) -> Value:
    """The interleave where every phase has o / s outputs per axis: computed over the
    spatial axes split in two, (o div s, o mod s) each, and viewed as `shape`. The phase
    is then an axis of its own and every load affine (the kernels split by phase and
    zip the phases' vectors: compiler/codegen/c/turn.py), where o div s and o mod s of one
    axis left a select of padded loads per element."""
    nd = len(strides)
    split = [*shape[:2], *(x for o, s in zip(shape[2:], strides, strict=True) for x in (o // s, s))]
    i = out_index(len(split))
    at = [i[0], i[1], *(i[2 + 2 * d] for d in range(nd))]
    value = phase_select(phases, at, [i[3 + 2 * d] for d in range(nd)], padded=False)
    values = list(phases.values())
    return cx.view(cx.emit(compute(split, value, values), values), shape)


def phase_select(phases: dict[tuple[int, ...], Value], at: Sequence[Expr], position: Sequence[Expr],
                 padded: bool) -> Expr:
    """A select chain reading phase p's output at `at` where every spatial axis' phase
    position (`position`) equals p's (padded loads where other phases' indices run past
    their ends)."""
    value: Expr | None = None
    for pos, (phase, v) in enumerate(phases.items()):
        element = load(pos, v, at, pad=scalar(0, v.dtype).value if padded else None)
        if value is None:
            value = element
            continue
        hit = None
        for p, want in zip(position, phase, strict=True):
            eq = call("eq", p, idx(want))
            hit = eq if hit is None else call("and", hit, eq)
        assert hit is not None
        value = select(hit, element, value)
    assert value is not None
    return value
