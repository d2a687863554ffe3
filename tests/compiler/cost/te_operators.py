"""Hand-written TE Computes of common operators for the cost-model and rTile tests."""

from __future__ import annotations

from compiler.ir.te import Axis, Compute, Load, TensorType, Var, call, cast

F32 = "float32"


def _v(*names: str) -> tuple[Var, ...]:
    return tuple(Var(n) for n in names)


def matmul(m: int, n: int, k: int) -> Compute:
    i, j, r = _v("i", "j", "r")
    return Compute(
        axes=(Axis("i", m), Axis("j", n)), body=Load(0, (i, r), F32) * Load(1, (r, j), F32),
        inputs=(TensorType((m, k), F32), TensorType((k, n), F32)), dtype=F32,
        reduce_axes=(Axis("r", k),), reduce_op="sum", label="MatMul")


def batch_matmul(b: int, m: int, n: int, k: int) -> Compute:
    z, i, j, r = _v("b", "i", "j", "r")
    return Compute(
        axes=(Axis("b", b), Axis("i", m), Axis("j", n)),
        body=Load(0, (z, i, r), F32) * Load(1, (z, r, j), F32),
        inputs=(TensorType((b, m, k), F32), TensorType((b, k, n), F32)), dtype=F32,
        reduce_axes=(Axis("r", k),), reduce_op="sum", label="MatMul")


def conv2d(n: int, c: int, h: int, w: int, f: int, kh: int, kw: int,
           stride: int = 1, pad: int = 0) -> Compute:
    """NCHW convolution; padding by padded loads."""
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    b, o, y, x, rc, ry, rx = _v("n", "f", "y", "x", "rc", "ry", "rx")
    data = Load(0, (b, rc, y * stride + ry - pad, x * stride + rx - pad), F32, pad=0.0)
    return Compute(
        axes=(Axis("n", n), Axis("f", f), Axis("y", oh), Axis("x", ow)),
        body=data * Load(1, (o, rc, ry, rx), F32),
        inputs=(TensorType((n, c, h, w), F32), TensorType((f, c, kh, kw), F32)), dtype=F32,
        reduce_axes=(Axis("rc", c), Axis("ry", kh), Axis("rx", kw)), reduce_op="sum",
        label="Conv")


def maxpool2d(n: int, c: int, h: int, w: int, k: int, stride: int) -> Compute:
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    b, ch, y, x, ry, rx = _v("n", "c", "y", "x", "ry", "rx")
    return Compute(
        axes=(Axis("n", n), Axis("c", c), Axis("y", oh), Axis("x", ow)),
        body=Load(0, (b, ch, y * stride + ry, x * stride + rx), F32),
        inputs=(TensorType((n, c, h, w), F32),), dtype=F32,
        reduce_axes=(Axis("ry", k), Axis("rx", k)), reduce_op="max", label="MaxPool")


def row_max(m: int, n: int) -> Compute:
    """Softmax's first step: the max over the innermost axis."""
    i, j = _v("i", "j")
    return Compute(axes=(Axis("i", m),), body=Load(0, (i, j), F32),
                   inputs=(TensorType((m, n), F32),), dtype=F32,
                   reduce_axes=(Axis("j", n),), reduce_op="max", label="ReduceMax")


def row_sum_exp(m: int, n: int) -> Compute:
    """Softmax's second step: sum_j exp(x[i, j] - max[i])."""
    i, j = _v("i", "j")
    body = call("exp", Load(0, (i, j), F32) - Load(1, (i,), F32))
    return Compute(axes=(Axis("i", m),), body=body,
                   inputs=(TensorType((m, n), F32), TensorType((m,), F32)), dtype=F32,
                   reduce_axes=(Axis("j", n),), reduce_op="sum", label="Softmax")


def row_mean(m: int, n: int) -> Compute:
    i, j = _v("i", "j")
    return Compute(axes=(Axis("i", m),), body=Load(0, (i, j), F32),
                   inputs=(TensorType((m, n), F32),), dtype=F32,
                   reduce_axes=(Axis("j", n),), reduce_op="sum",
                   post=Var("acc", F32) / float(n), label="ReduceMean")


def column_sum(m: int, n: int) -> Compute:
    """A reduction over the outer axis: the reduce axis is strided in memory."""
    i, j = _v("i", "j")
    return Compute(axes=(Axis("j", n),), body=Load(0, (i, j), F32),
                   inputs=(TensorType((m, n), F32),), dtype=F32,
                   reduce_axes=(Axis("i", m),), reduce_op="sum", label="ReduceSum")


def add_relu(*shape: int, dt: str = F32) -> Compute:
    idx = _v(*(f"i{d}" for d in range(len(shape))))
    body = call("max", Load(0, idx, dt) + Load(1, idx, dt), 0.0)
    return Compute(axes=tuple(Axis(f"i{d}", e) for d, e in enumerate(shape)), body=body,
                   inputs=(TensorType(shape, dt), TensorType(shape, dt)), dtype=dt,
                   label="Add+Relu")


def bias_add(m: int, n: int) -> Compute:
    i, j = _v("i", "j")
    return Compute(axes=(Axis("i", m), Axis("j", n)),
                   body=Load(0, (i, j), F32) + Load(1, (j,), F32),
                   inputs=(TensorType((m, n), F32), TensorType((n,), F32)), dtype=F32,
                   label="Add")


def transpose(m: int, n: int) -> Compute:
    i, j = _v("i", "j")
    return Compute(axes=(Axis("i", n), Axis("j", m)), body=Load(0, (j, i), F32),
                   inputs=(TensorType((m, n), F32),), dtype=F32, label="Transpose")


def total_sum(m: int, n: int) -> Compute:
    """A 0-d output: the sum of a whole matrix."""
    r, s = _v("r", "s")
    return Compute(axes=(), body=Load(0, (r, s), F32), inputs=(TensorType((m, n), F32),),
                   dtype=F32, reduce_axes=(Axis("r", m), Axis("s", n)), reduce_op="sum",
                   label="ReduceSum")


def gather_rows(vocab: int, dim: int, count: int) -> Compute:
    """Embedding lookup: a data-dependent index reads the table's whole extent."""
    i, j = _v("i", "j")
    row = cast(Load(1, (i,), "int64"), "int64")
    return Compute(axes=(Axis("i", count), Axis("j", dim)), body=Load(0, (row, j), F32),
                   inputs=(TensorType((vocab, dim), F32), TensorType((count,), "int64")),
                   dtype=F32, label="Gather")


def operator_set() -> dict[str, Compute]:
    """About twenty operator shapes of the kind models contain."""
    return {
        "matmul_4096": matmul(4096, 4096, 4096),
        "matmul_1024": matmul(1024, 1024, 1024),
        "matmul_odd": matmul(1000, 999, 333),
        "gemv": matmul(1, 4096, 4096),
        "bert_qkv": matmul(384, 2304, 768),
        "bmm_attention": batch_matmul(12, 384, 384, 64),
        "conv_resnet_3x3": conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1),
        "conv_stem_7x7": conv2d(1, 3, 224, 224, 64, 7, 7, 2, 3),
        "conv_1x1": conv2d(8, 256, 14, 14, 1024, 1, 1),
        "conv_depth_small": conv2d(1, 512, 7, 7, 512, 3, 3, 1, 1),
        "maxpool": maxpool2d(1, 64, 112, 112, 3, 2),
        "softmax_max": row_max(4096, 1000),
        "softmax_sum": row_sum_exp(12 * 384, 384),
        "layernorm_mean": row_mean(384, 768),
        "add_relu_4d": add_relu(8, 64, 56, 56),
        "add_relu_1d": add_relu(1 << 20),
        "bias_add": bias_add(384, 3072),
        "transpose": transpose(1024, 768),
        "sum_all": total_sum(1024, 1024),
        "gather": gather_rows(30522, 768, 128),
    }
