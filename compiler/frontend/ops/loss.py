"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (log-softmax, then the former)."""

from __future__ import annotations

from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.movement import element_index
from compiler.frontend.ops.normalization import softmax_values
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import INDEX
from compiler.ir.te import ACC, Expr, Var, call, cast, select


def nll_values(cx: OpContext, logp: Value, target: Value, weight: Value | None) -> Value:
    """The loss of each target element, or its sum / weighted mean per the `reduction` attribute."""
    n_classes = logp.shape[1]
    ignore = cx.attr("ignore_index")
    reduction = cx.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise cx.error(f"reduction {reduction!r}")
    if target.shape != (logp.shape[0], *logp.shape[2:]):
        raise cx.error(f"target {list(target.shape)} does not match input {list(logp.shape)}")

    def terms(at: list[Expr]) -> tuple[Expr, Expr, Expr]:
        """(valid, class index, weight) of the target element at `at`."""
        t = cast(load(1, target, at), INDEX)
        valid = call("ne", t, idx(ignore)) if ignore is not None else None
        c = element_index(t, n_classes)
        w = load(2, weight, [c]) if weight is not None else scalar(1.0, logp.dtype)
        return (valid if valid is not None else call("eq", t, t)), c, w

    inputs = [logp, target, *([weight] if weight is not None else [])]
    i = out_index(target.rank)
    valid, c, w = terms(i)
    zero = scalar(0.0, logp.dtype)
    loss = select(valid, -(load(0, logp, [i[0], c, *i[1:]]) * w), zero)
    per_element = cx.emit(compute(target.shape, loss, inputs), inputs)
    if reduction == "none":
        return per_element
    r = reduce_index(target.rank)
    total_body = load(0, per_element, r)
    if reduction == "sum":
        return cx.emit(compute((), total_body, [per_element], reduce=target.shape, reduce_op="sum"), [per_element])
    valid_r, _, w_r = terms(r)
    denominator = cx.emit(compute((), select(valid_r, w_r, zero), inputs, reduce=target.shape, reduce_op="sum"),
                          inputs)
    post = Var(ACC, logp.dtype) / load(1, denominator, [])
    return cx.emit(compute((), total_body, [per_element, denominator], reduce=target.shape, reduce_op="sum",
                           post=post), [per_element, denominator])


@lowering("NegativeLogLikelihoodLoss")
def negative_log_likelihood(cx: OpContext) -> Outputs:
    return [nll_values(cx, cx.input(0), cx.input(1), cx.optional(2))]


@lowering("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(cx: OpContext) -> Outputs:
    scores = cx.input(0)
    logp = softmax_values(cx, scores, [1], log=True)
    return [nll_values(cx, logp, cx.input(1), cx.optional(2)), logp]
