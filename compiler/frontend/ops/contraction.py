"""Contractions: MatMul, Gemm and Conv, each one sum-reduce Compute."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.frontend.broadcast import broadcast_index, broadcast_shape
from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.windows import window_of
from compiler.frontend.ops.winograd import winograd_choice, winograd_conv, winograd_fits
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.te import ACC, Expr, Var, cast

# term(a element, b element, output row index, output column index) -> the summed product
ProductTerm = Callable[[Expr, Expr, Expr | None, Expr | None], Expr]


def _product(a: Expr, b: Expr, row: Expr | None, col: Expr | None) -> Expr:
    return a * b


def widened(e: Expr) -> Expr:
    """A half-precision operand as float32: the products are summed in float32 and rounded
    to half once at the end (as onnxruntime and BLAS libraries do), not one at a time."""
    return cast(e, "float32") if e.dtype == "float16" else e


def _rounded(value: Expr, like: Value) -> Expr:
    """A sum of `like`'s elements (widened if half) back in `like`'s type."""
    return cast(value, like.dtype) if like.dtype == "float16" else value


@lowering("MatMul")
def matmul(cx: OpContext) -> Outputs:
    a, b = cx.input(0), cx.input(1)
    if a.dtype != b.dtype:
        raise cx.error(f"operand types differ: {a.dtype} and {b.dtype}")
    return [matmul_values(cx, a, b)]


def matmul_values(cx: OpContext, a: Value, b: Value, term: ProductTerm = _product,
                  extra: Sequence[Value] = ()) -> Value:
    """numpy-style matmul (batched, broadcast, 1-D operands) as one sum-reduce Compute.

    `term` forms each product (quantized variants subtract zero points read
    from `extra`, which follow a and b as Compute inputs 2...).
    """
    if a.rank == 0 or b.rank == 0:
        raise cx.error("MatMul operands must have rank >= 1")
    k = a.shape[-1]
    kb = b.shape[-2] if b.rank >= 2 else b.shape[0]
    if k != kb:
        raise cx.error(f"inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    a_batch, b_batch = a.shape[:-2], b.shape[:-2]
    batch = broadcast_shape([a_batch, b_batch], "MatMul batch dims")
    rows = [a.shape[-2]] if a.rank >= 2 else []
    cols = [b.shape[-1]] if b.rank >= 2 else []
    shape = (*batch, *rows, *cols)
    i = out_index(len(shape))
    nb = len(batch)
    (r,) = reduce_index(1)
    a_at = [*broadcast_index(a_batch, i[:nb]), *i[nb:nb + len(rows)], r]
    b_at = [*broadcast_index(b_batch, i[:nb]), r, *i[nb + len(rows):]]
    row = i[nb] if rows else None
    col = i[-1] if cols else None
    body = term(widened(load(0, a, a_at)), widened(load(1, b, b_at)), row, col)
    acc = Var(ACC, body.dtype)
    post = _rounded(acc, a)
    inputs = [a, b, *extra]
    return cx.emit(compute(shape, body, inputs, reduce=[k], reduce_op="sum",
                           post=None if post is acc else post), inputs)


@lowering("Gemm")
def gemm(cx: OpContext) -> Outputs:
    a, b, c = cx.input(0), cx.input(1), cx.optional(2)
    if a.rank != 2 or b.rank != 2:
        raise cx.error("Gemm operands must be 2-D")
    ta, tb = cx.attr("transA", 0), cx.attr("transB", 0)
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    kb, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != kb:
        raise cx.error(f"inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    i, j = out_index(2)
    (r,) = reduce_index(1)
    body = widened(load(0, a, [r, i] if ta else [i, r])) * widened(load(1, b, [j, r] if tb else [r, j]))
    alpha, beta = float(cx.attr("alpha", 1.0)), float(cx.attr("beta", 1.0))
    acc: Expr = Var(ACC, body.dtype)
    post = acc if alpha == 1.0 else scalar(alpha, body) * acc
    inputs = [a, b]
    if c is not None and beta != 0.0:
        broadcast_shape([c.shape, (m, n)], "Gemm C")
        bias = widened(load(2, c, broadcast_index(c.shape, [i, j])))
        post = post + (bias if beta == 1.0 else scalar(beta, body) * bias)
        inputs.append(c)
    post = _rounded(post, a)
    return [cx.emit(compute((m, n), body, inputs, reduce=[k], reduce_op="sum",
                            post=None if post is acc else post), inputs)]


def conv_operands(cx: OpContext) -> tuple[Value, Value, Value | None, int, int]:
    """Conv / ConvTranspose inputs (x, w, bias), the number of spatial dims and the group count."""
    x, w, bias = cx.input(0), cx.input(1), cx.optional(2)
    nd = x.rank - 2
    if nd < 1 or w.rank != x.rank:
        raise cx.error(f"input {list(x.shape)} and weight {list(w.shape)} ranks do not fit a convolution")
    return x, w, bias, nd, int(cx.attr("group", 1))


def emit_conv(cx: OpContext, shape: tuple[int, ...], body: Expr, x: Value, w: Value, bias: Value | None,
               reduce: list[int], extra: Sequence[Value] = (), channel: Sequence[Expr] = (Var("i1"),)) -> Value:
    """The conv Compute: a sum over `reduce`, plus the per-output-channel bias when given
    (read at index `channel`)."""
    inputs = [x, w]
    acc = Var(ACC, body.dtype)
    post: Expr = acc
    if bias is not None:
        post = acc + cast(load(2, bias, channel), body.dtype)
        inputs.append(bias)
    post = _rounded(post, x)
    inputs += extra
    return cx.emit(compute(shape, body, inputs, reduce=reduce, reduce_op="sum",
                           post=None if post is acc else post), inputs)


@lowering("Conv")
def conv(cx: OpContext) -> Outputs:
    x, w, bias, _, groups = conv_operands(cx)
    if tuple(cx.attr("kernel_shape", w.shape[2:])) == w.shape[2:]:  # else conv_values names the mismatch
        win = window_of(cx, x.shape[2:], w.shape[2:])
        if winograd_fits(x, w, groups, win) and cx.builder.choose(winograd_choice(x, w, bias, win)):
            return [winograd_conv(cx, x, w, bias, win)]
    return [conv_values(cx, x, w, bias, groups)]


def conv_values(cx: OpContext, x: Value, w: Value, bias: Value | None, groups: int,
                term: ProductTerm = _product, extra: Sequence[Value] = (), pad: float | int = 0) -> Value:
    """Convolution as one sum-reduce over (input channel, kernel...) with padded loads of x.

    `term(x element, w element, output channel, None)` forms each product; `pad`
    is what x reads outside its bounds; `extra` inputs follow x, w (and bias).
    """
    nd = x.rank - 2
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    kernel = tuple(cx.attr("kernel_shape", w.shape[2:]))
    if kernel != w.shape[2:]:
        raise cx.error(f"kernel_shape {list(kernel)} differs from the weight's {list(w.shape[2:])}")
    if groups < 1 or c != cg * groups or m % groups:
        raise cx.error(f"channels {c} -> {m} do not split into {groups} groups of {cg}")
    win = window_of(cx, x.shape[2:], kernel)
    r = reduce_index(1 + nd)
    mg = m // groups
    # Groups of more than one output channel get an axis of their own: the output is
    # (n, group, channel in group, ...), x is read as (n, group, cg, ...), w as (group, mg,
    # cg, ...) and the bias as (group, mg), all views, so that every index is a plain or
    # affine one (the group is a batch axis of the contraction); the output is viewed as
    # (n, m, ...) after. With the group found by a division per element instead, RegNet's
    # grouped 3x3 convolutions ran scalar, 12x slower than onnxruntime. One output channel
    # per group (depthwise) is affine as it is.
    lead = 3 if groups > 1 and mg > 1 else 2
    i = out_index(lead + nd)
    if lead == 3:
        x = cx.view(x, (n, groups, cg, *x.shape[2:]))
        w = cx.view(w, (groups, mg, cg, *kernel))
        bias = None if bias is None else cx.view(bias, (groups, mg))
        out, channel, at, tap = i[1] * idx(mg) + i[2], [i[1], i[2]], [i[0], i[1], r[0]], [i[1], i[2], *r]
    else:
        out, channel, tap = i[1], [i[1]], [i[1], *r]
        at = [i[0], r[0] if groups == 1 else i[1] * idx(cg) + r[0]]
    at += [win.position(d, i[lead + d], r[1 + d]) for d in range(nd)]
    outside = scalar(pad, x.dtype).value if win.reads_outside(x.shape[lead:]) else None
    body = term(widened(load(0, x, at, pad=outside)), widened(load(1, w, tap)), out, None)
    shape = (n, groups, mg, *win.out) if lead == 3 else (n, m, *win.out)
    return cx.view(emit_conv(cx, shape, body, x, w, bias, [cg, *kernel], extra, channel), (n, m, *win.out))
