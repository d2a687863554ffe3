"""Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks", 2016): a 3x3 stride-1 convolution with 2.25x fewer
multiply-adds in the contraction that dominates.

For each 2 x 2 tile of outputs and its 4 x 4 window of input, Y = A^T [(G g G^T) . (B^T d B)] A:
- the weights' transform U = G g G^T (16 values per output and input channel) is done here,
  on the constant weights;
- the input's, V = B^T d B, is a contraction of each 4 x 4 window (read at stride 2 from
  the padded input, a convolution's patches) with the 16 x 16 table B^T (x) B^T;
- the 16 products are one batched matmul over the input channels, M = U V;
- the output's, Y = A^T M A, is per position (i, j) of the tile a signed sum of 9 of the
  16 products (plus the bias); the four positions are interleaved as a ConvTranspose's
  phases are (compiler/frontend/ops/phases.py).
The tables' entries are 0, +-1 and +-1/2: the results differ from the direct sum by rounding.

Which lowering is faster depends on the machine (compiler/frontend/choices.py): the
convolution asks its `Choice` (`winograd_choice`), which the pipeline answers by timing
both on the convolution alone; the thresholds below are where it is worth asking, and the
answer where nothing is timed.

The input transform's dense table is three quarters zeros and the output transform reads
9 products per output: both are generic kernels, which is why the channel and tile counts
below are needed (a 64-channel 56 x 56 convolution: the batched matmul 448 us where the
direct convolution takes 901, the transforms 200 and 197). Transform kernels of their own
would let smaller convolutions gain too. The transformed weights take 16/9 the bytes.
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
from compiler.ir.te import Expr

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
# nothing is timed, the guess is Winograd from GUESS_TILES on.
MIN_CHANNELS = 64  # input and output channels
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
    key = f"winograd x{list(x.shape)} w{list(w.shape)} pads{pads} bias{int(bias is not None)}"

    def model(copies: int) -> bytes:
        rng = np.random.default_rng(0)
        consts, nodes, outs = [], [], []
        for n in range(copies):
            weights = [numpy_helper.from_array((rng.standard_normal(w.shape) * 0.05).astype(np.float32), f"w{n}")]
            if bias is not None:
                weights.append(numpy_helper.from_array(rng.standard_normal(bias.shape).astype(np.float32), f"b{n}"))
            nodes.append(helper.make_node("Conv", ["x", *(t.name for t in weights)], [f"y{n}"], kernel_shape=[3, 3],
                                          pads=pads))
            outs.append(helper.make_tensor_value_info(f"y{n}", TensorProto.FLOAT, [x.shape[0], w.shape[0], *win.out]))
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
    in_table = cx.constant(np.einsum("xa,yb->xyab", _BT, _BT).reshape(16, 4, 4).astype(np.float32))

    i, r = out_index(5), reduce_index(2)
    at = [i[0], i[1], *(i[3 + d] * idx(2) + r[d] - idx(win.pad_begin[d]) for d in range(2))]
    reads_outside = win.padded or any(2 * t + 2 > s for t, s in zip((th, tw), x.shape[2:], strict=True))
    pad = scalar(0, x.dtype).value if reads_outside else None
    body: Expr = load(0, x, at, pad=pad) * load(1, in_table, [i[2], r[0], r[1]])
    v = cx.emit(compute((n, c, 16, th, tw), body, [x, in_table], reduce=[4, 4], reduce_op="sum"), [x, in_table])

    i, (rc,) = out_index(5), reduce_index(1)
    body = load(0, weights, [i[1], i[2], rc]) * load(1, v, [i[0], rc, i[1], i[3], i[4]])
    m = cx.emit(compute((n, 16, k, th, tw), body, [weights, v], reduce=[c], reduce_op="sum"), [weights, v])

    phases = {}
    for pi in range(2):
        for pj in range(2):
            coeff = np.einsum("x,y->xy", _AT[pi], _AT[pj]).reshape(16)
            i = out_index(4)
            value: Expr | None = None
            for e, cf in enumerate(coeff):
                if not cf:
                    continue
                term = load(0, m, [i[0], idx(e), i[1], i[2], i[3]])
                value = term if value is None else (value + term if cf > 0 else value - term)
            assert value is not None and coeff[np.nonzero(coeff)[0][0]] == 1
            inputs = [m]
            if bias is not None:
                value = value + load(1, bias, [i[1]])
                inputs.append(bias)
            phases[(pi, pj)] = cx.emit(compute((n, k, th, tw), value, inputs), inputs)
    return interleave_phases(cx, phases, (2, 2), (n, k, *win.out))
