"""Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks", 2016): a 3x3 stride-1 convolution with 2.25x fewer
multiply-adds in the contraction that dominates.

For each 2 x 2 tile of outputs and its 4 x 4 window of input, Y = A^T [(G g G^T) . (B^T d B)] A:
- the weights' transform U = G g G^T (16 values per output and input channel) is done here,
  on the constant weights;
- the input's, V = B^T d B, is per table position a signed sum of 4 of the tile's 4 x 4
  window (read at stride 2 from the padded input): every row of B^T holds two +-1. One
  element-wise op selects among the 16 sums by position, and the C kernel runs each
  position's range with its own sum (compiler/codegen/c/kernel.py `_outer_pieces`);
- the 16 products are one batched matmul over the input channels, M = U V;
- the output's, Y = A^T M A, is per position (i, j) of the tile a signed sum of 9 of the
  16 products (plus the bias); the four positions are interleaved as a ConvTranspose's
  phases are (compiler/frontend/ops/phases.py).
The tables' entries are 0, +-1 and +-1/2: the results differ from the direct sum by rounding.

Which lowering is faster depends on the machine (compiler/frontend/choices.py): the
convolution asks its `Choice` (`winograd_choice`), which the pipeline answers by timing
both on the convolution alone; the thresholds below are where it is worth asking, and the
answer where nothing is timed.

The input transform was a contraction with the dense 16 x 16 table B^T (x) B^T, three
quarters zeros: 372 us of a 64-channel convolution on 56 x 56 at one thread on a Zen 4
(the batched matmul 1120, the direct convolution 2100); as signed sums, 180 us. The
transformed weights take 16/9 the bytes.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend.choices import Choice
from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.phases import interleave_phases
from compiler.frontend.ops.windows import Window
from compiler.frontend.registry import OpContext
from compiler.frontend.values import Value
from compiler.ir.te import Expr, call, select

_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)
# Where the machine is asked (one 3x3 convolution with a Relu, Winograd against the direct
# one, 1 / 2 threads). On a Zen 5: 32 channels on 112 x 112 0.78x; 64 on 56 x 56 1.10x /
# 1.09x; 128 on 28 x 28 1.25x / 1.29x; 256 on 14 x 14 1.37x / 0.95x (49 tiles: the small
# kernels and their barriers cost more at 2 threads). On an Emerald Rapids Xeon 64 on 56 x 56
# and 128 on 28 x 28 lost at both, 256 on 14 x 14 gained alone (1.78 against 2.10 ms) but
# not in resnet18. Timed with the residual Add and Relu that follow it, it still gained
# (1.23 against 1.38 ms) and resnet18 still ran slower: alone, called again and again, the
# op finds its weights (16/9 the bytes as Winograd) and input in cache, where in the model
# it does not (docs/PROFILE.md, stops 36 and 37): the pipeline now times it with its weights
# out of cache where the model's overflow the caches (compiler/pipeline.py `choice_copies`).
# On a Zen 3 (AVX2), so timed, 256 on 14 x 14 took 3.1 against 4.5 ms (1.9 against 2.5 at
# two threads) and ResNet-18 ran 4-14% faster with it. Above these the timing decides; where
# nothing is timed, the guess is Winograd from GUESS_TILES on. With the input transform as
# signed sums, on a Zen 4 (1 / 2 threads): 32 channels on 112 x 112 1.92 / 1.04 ms against
# 2.15 / 1.08 direct, so 32 channels are asked too; 64 on 56 x 56 1.39 / 0.74 against 2.10 / 1.07.
MIN_CHANNELS = 32  # input and output channels
MIN_TILES = 49  # 2 x 2 output tiles: a 14 x 14 output
GUESS_TILES = 196  # a 28 x 28 output


def winograd_fits(x: Value, w: Value, groups: int, win: Window) -> bool:
    """Whether convolution (x, w) runs as F(2x2, 3x3): float32, 2-D, one group, a 3x3 kernel
    at stride 1 without dilation, constant weights (transformed here), an even output size,
    and enough channels and tiles to repay the transforms."""
    return (x.rank == 4 and x.dtype == "float32" and w.dtype == "float32" and w.is_const and groups == 1
            and win.kernel == (3, 3) and win.strides == (1, 1) and win.dilations == (1, 1)
            and all(o % 2 == 0 for o in win.out) and min(x.shape[1], w.shape[0]) >= MIN_CHANNELS
            and win.out[0] * win.out[1] // 4 >= MIN_TILES)


def winograd_choice(x: Value, w: Value, bias: Value | None, win: Window) -> Choice:
    """The choice between Winograd and the direct convolution for convolution (x, w, bias)
    with window `win` (`winograd_fits` holds), and the convolution alone to time them on."""
    pads = [*win.pad_begin, *win.pad_end]
    # Copies of a convolution that keeps its input's shape run as a chain, each reading the
    # output of the one before, as a network's do: its input in cache, its weights out of it
    # where there are many, its intermediates reused copy after copy. Side by side, reading one
    # input, 16 copies of a 64-channel convolution on 56 x 56 timed Winograd 1.14 against 1.06
    # ms direct on a Zen 4, where ResNet-18 ran 9% faster with it (13.2 against 14.6 ms):
    # sixteen outputs and their intermediates live at once did not fit the caches.
    chained = (w.shape[0], *win.out) == x.shape[1:]
    key = (f"winograd x{list(x.shape)} w{list(w.shape)} pads{pads} bias{int(bias is not None)}"
           f"{' chained' if chained else ''}")

    def model(copies: int) -> bytes:
        rng = np.random.default_rng(0)
        scale = 1 / math.sqrt(math.prod(w.shape[1:]))  # a chain's values neither grow nor fade
        consts, nodes, outs = [], [], []
        for n in range(copies):
            weights = [numpy_helper.from_array((rng.standard_normal(w.shape) * scale).astype(np.float32), f"w{n}")]
            if bias is not None:
                weights.append(numpy_helper.from_array(rng.standard_normal(bias.shape).astype(np.float32), f"b{n}"))
            source = f"y{n - 1}" if chained and n else "x"
            nodes.append(helper.make_node("Conv", [source, *(t.name for t in weights)], [f"y{n}"], kernel_shape=[3, 3],
                                          pads=pads))
            if not chained or n == copies - 1:
                outs.append(helper.make_tensor_value_info(f"y{n}", TensorProto.FLOAT,
                                                          [x.shape[0], w.shape[0], *win.out]))
            consts += weights
        graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                  outs, consts)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()

    weight_bytes = 4 * (math.prod(w.shape) + (math.prod(bias.shape) if bias is not None else 0))
    return Choice("winograd", key, default=win.out[0] * win.out[1] // 4 >= GUESS_TILES, model=model,
                  weight_bytes=weight_bytes)


def winograd_conv(cx: OpContext, x: Value, w: Value, bias: Value | None, win: Window) -> Value:
    """Convolution (x, w, bias) as F(2x2, 3x3); `winograd_fits` must hold."""
    assert w.array is not None
    n, c = x.shape[:2]
    k = w.shape[0]
    th, tw = win.out[0] // 2, win.out[1] // 2
    u = np.einsum("xa,kcab,yb->xykc", _G, w.array.astype(np.float64), _G).reshape(16, k, c)
    weights = cx.constant(u.astype(np.float32))
    i = out_index(5)

    def at(a: int, b: int) -> list[Expr]:  # the tile's window element (a, b)
        return [i[0], i[1], *(i[3 + d] * idx(2) + idx(ab - win.pad_begin[d]) for d, ab in enumerate((a, b)))]
    reads_outside = win.padded or any(2 * t + 2 > s for t, s in zip((th, tw), x.shape[2:], strict=True))
    pad = scalar(0, x.dtype).value if reads_outside else None
    body: Expr | None = None
    for e in reversed(range(16)):  # a select chain over the table position: one signed sum each
        term = _signed_sum([(load(0, x, at(a, b), pad=pad), _BT[e // 4, a] * _BT[e % 4, b])
                            for a in range(4) for b in range(4)])
        body = term if body is None else select(call("lt", i[2], idx(e + 1)), term, body)
    assert body is not None
    v = cx.emit(compute((n, c, 16, th, tw), body, [x]), [x])

    i, (rc,) = out_index(5), reduce_index(1)
    body = load(0, weights, [i[1], i[2], rc]) * load(1, v, [i[0], rc, i[1], i[3], i[4]])
    m = cx.emit(compute((n, 16, k, th, tw), body, [weights, v], reduce=[c], reduce_op="sum"), [weights, v])

    phases = {}
    for pi in range(2):
        for pj in range(2):
            coeff = np.einsum("x,y->xy", _AT[pi], _AT[pj]).reshape(16)
            i = out_index(4)
            value = _signed_sum([(load(0, m, [i[0], idx(e), i[1], i[2], i[3]]), cf) for e, cf in enumerate(coeff)])
            inputs = [m]
            if bias is not None:
                value = value + load(1, bias, [i[1]])
                inputs.append(bias)
            phases[(pi, pj)] = cx.emit(compute((n, k, th, tw), value, inputs), inputs)
    return interleave_phases(cx, phases, (2, 2), (n, k, *win.out))


def _signed_sum(terms: list[tuple[Expr, float]]) -> Expr:
    """The sum of the terms whose coefficient is +1 minus those whose is -1 (the
    transforms' tables hold 0 and +-1 where they are applied; every row has a +1)."""
    plus = [t for t, cf in terms if cf == 1]
    minus = [t for t, cf in terms if cf == -1]
    assert plus and len(plus) + len(minus) == sum(cf != 0 for _, cf in terms)
    value = plus[0]
    for t in plus[1:]:
        value = value + t
    for t in minus:
        value = value - t
    return value
