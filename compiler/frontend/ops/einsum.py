"""Einsum: one Compute, output labels as spatial axes, summed labels as reduce axes."""

from __future__ import annotations

from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.ir.te import Expr

Label = str  # a letter, or "...k" for the k-th broadcast (ellipsis) dim


def _labels(cx: OpContext, term: str, rank: int | None, ellipsis_rank: int) -> list[Label]:
    letters = term.replace("...", "")
    if term.count("...") > 1 or (letters and not letters.isalpha()):
        raise cx.error(f"bad einsum term {term!r}")
    if "..." not in term:
        return list(term)
    head, tail = term.split("...")
    own = ellipsis_rank if rank is None else rank - len(head) - len(tail)
    return [*head, *(f"...{k}" for k in range(ellipsis_rank - own, ellipsis_rank)), *tail]


@lowering("Einsum")
def einsum(cx: OpContext) -> Outputs:
    operands = [v for v in cx.inputs if v is not None]
    equation = str(cx.attr("equation")).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise cx.error(f"equation {equation!r} names {len(terms)} operands, got {len(operands)}")
    ellipsis_rank = max((v.rank - len(t.replace("...", "")) for t, v in zip(terms, operands, strict=True)
                         if "..." in t), default=0)
    labels = [_labels(cx, t, v.rank, ellipsis_rank) for t, v in zip(terms, operands, strict=True)]
    extent: dict[Label, int] = {}
    for v, ls in zip(operands, labels, strict=True):
        if len(ls) != v.rank:
            raise cx.error(f"term for a rank-{v.rank} operand has {len(ls)} labels")
        for label, n in zip(ls, v.shape, strict=True):
            seen = extent.setdefault(label, n)
            if seen != n and not (label.startswith("...") and 1 in (seen, n)):
                raise cx.error(f"label {label!r} has extents {seen} and {n}")
            extent[label] = max(seen, n) if label.startswith("...") else n
    first_seen = list(dict.fromkeys(label for ls in labels for label in ls))
    if arrow:
        out = _labels(cx, rhs, None, ellipsis_rank)
    else:
        counts = {label: sum(ls.count(label) for ls in labels) for label in first_seen}
        out = [f"...{k}" for k in range(ellipsis_rank)]
        out += sorted(label for label in first_seen if counts[label] == 1 and not label.startswith("..."))
    summed = [label for label in first_seen if label not in out]
    var: dict[Label, Expr] = dict(zip(out, out_index(len(out)), strict=True))
    var.update(zip(summed, reduce_index(len(summed)), strict=True))
    body: Expr | None = None
    for k, (v, ls) in enumerate(zip(operands, labels, strict=True)):
        at = [idx(0) if n == 1 and extent[label] != 1 else var[label] for label, n in zip(ls, v.shape, strict=True)]
        term = load(k, v, at)
        body = term if body is None else body * term
    assert body is not None
    shape = [extent[label] for label in out]
    c = compute(shape, body, operands, reduce=[extent[label] for label in summed],
                reduce_op="sum" if summed else None)
    return [cx.emit(c, operands)]


