"""Winograd's minimal filtering F(m x m, 3x3) (Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks", 2016): a 3x3 stride-1 convolution with fewer multiply-adds
in the contraction that dominates, 2.25x fewer with tiles of 2 x 2 outputs (F2), 4x with
tiles of 4 x 4 (F4, where the output is a multiple of 4 with enough tiles: `winograd_tables`).

For each m x m tile of outputs and its (m + 2) x (m + 2) window of input (s = (m + 2)^2
table positions: 16 or 36), Y = A^T [(G g G^T) . (B^T d B)] A:
- the weights' transform U = G g G^T (s values per output and input channel) is done here,
  on the constant weights;
- the input's, V = B^T d B, runs in two passes: the window's columns, S[x, b] =
  sum_a B^T[x, a] d[a, b] (read at stride m from the padded input), then V[x, y] =
  sum_b B^T[y, b] S[x, b], each a weighted sum of at most 4 values per position (the rows
  of B^T have 2 nonzeros in F2, 3 or 4 in F4). Each pass is one element-wise op over the
  table's two axes apart that selects among the m + 2 sums of one of them, and the C kernel
  runs each sum's range with its own (compiler/codegen/c/kernel.py `_pieces`); the second
  pass keeps the first in memory rather than recompute it at every read
  (compiler/schedule/tilegraph/registers.py `_recomputed`);
- the s products are one batched matmul over the input channels, M = U V;
- the output's, Y = A^T M A, likewise in two passes, the second with the bias written
  straight into the output's layout, viewed as (n, k, tile row, i, tile column, j).
An output that is no multiple of m gets partial tiles at its edges, their window read past
the input as padding and their outputs past the edge cut off (ResNet's 7 x 7 maps: 4 x 4
tiles of 2 x 2 for 49 outputs).
The results differ from the direct sum by rounding: F2's tables hold 0, +-1 and +-1/2, F4's
weights up to 64 and 1/24, so its rounding errors are larger (still far inside the
validation's tolerance: test_winograd.py).

Which lowering is faster depends on the machine (compiler/frontend/choices.py): the
convolution asks its `Choice` (`winograd_choice`), which the pipeline answers by timing
both on the convolution alone; the thresholds below are where it is worth asking, and the
answer where nothing is timed.

Measured on a Zen 4 (64 channels on 56 x 56, one thread; the direct convolution 2.10 ms,
onnxruntime's 2.05): F2 with its input transform a contraction with the dense 16 x 16 table
B^T (x) B^T (three quarters zeros) 1.52 ms, of which the transform 372 us; as signed sums in
one pass 1.39 ms (the transform 180 us); F4 in one pass 1.35 ms (the batched matmul 1014 ->
594 us, but 36 sums of 9 to 16 window values read at stride 4: 675 us); F4 in two passes
1.10 ms (the passes 233 and 75 us). The transformed weights take s / 9 the bytes: 16/9 in
F2, 4x in F4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend.choices import Choice
from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.windows import Window
from compiler.frontend.registry import OpContext
from compiler.frontend.values import Value
from compiler.ir.te import Expr, Load, call, select


@dataclass(frozen=True)
class _Tables:
    """F(m x m, 3 x 3): tiles of m x m outputs from (m + 2) x (m + 2) windows."""

    m: int
    bt: np.ndarray  # (m + 2) x (m + 2), the input's transform
    g: np.ndarray  # (m + 2) x 3, the weights'
    at: np.ndarray  # m x (m + 2), the output's


# Lavin and Gray's tables, interpolating at 0, +-1 (F2) and 0, +-1, +-2 (F4), and infinity.
F2 = _Tables(2, np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),
             np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64),
             np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64))
F4 = _Tables(4, np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
                          [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64),
             np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
                       [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64),
             np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
                      np.float64))
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
# nothing is timed, the guess is Winograd from GUESS_TILES on. With the transforms in two
# passes, on a Zen 4 (1 / 2 threads, against onnxruntime, level with the direct convolution
# there): 32 channels on 112 x 112 (F4) 1.53x / 1.50x, so 32 channels are asked too; 64 on
# 56 x 56 (F4) 1.87x / 1.84x; 128 on 28 x 28 (F4) 2.61x / 2.48x; 256 on 14 x 14 (F2)
# 1.92x / 1.84x; 512 on 7 x 7 (F2, partial tiles) 1.50x / 1.49x, direct 1.07x / 1.02x.
MIN_CHANNELS = 32  # input and output channels
MIN_TILES = 16  # 2 x 2 output tiles: a 7 x 7 output (partial tiles at its edges)
F4_MIN_TILES = 49  # 4 x 4 output tiles, whole: a 28 x 28 output
GUESS_TILES = 196  # a 28 x 28 output


def winograd_tables(win: Window) -> _Tables:
    """F4 where the output splits into F4_MIN_TILES 4 x 4 tiles or more, else F2: F4 takes 4x
    fewer multiply-adds than the direct convolution, F2 2.25x."""
    fits4 = all(o % 4 == 0 for o in win.out) and _tiles(win, 4) >= F4_MIN_TILES
    return F4 if fits4 else F2


def _tile_grid(win: Window, m: int) -> tuple[int, ...]:
    """Tiles of m x m outputs along each axis that cover the output (partial ones at its
    edges)."""
    return tuple(-(-o // m) for o in win.out)


def _tiles(win: Window, m: int) -> int:
    return math.prod(_tile_grid(win, m))


def winograd_fits(x: Value, w: Value, groups: int, win: Window) -> bool:
    """Whether convolution (x, w) runs as Winograd (F2 at least): float32, 2-D, one group, a 3x3 kernel
    at stride 1 without dilation, constant weights (transformed here),
    and enough channels and tiles to repay the transforms."""
    return (x.rank == 4 and x.dtype == "float32" and w.dtype == "float32" and w.is_const and groups == 1
            and win.kernel == (3, 3) and win.strides == (1, 1) and win.dilations == (1, 1)
            and min(x.shape[1], w.shape[0]) >= MIN_CHANNELS and _tiles(win, 2) >= MIN_TILES)


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
    key = (f"winograd F{winograd_tables(win).m} x{list(x.shape)} w{list(w.shape)} pads{pads} "
           f"bias{int(bias is not None)}{' chained' if chained else ''}")

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
    """Convolution (x, w, bias) as F(m x m, 3x3) with `winograd_tables`' m; `winograd_fits`
    must hold."""
    assert w.array is not None
    f = winograd_tables(win)
    m, side = f.m, f.m + 2  # outputs a tile side, inputs a window side
    size = side * side  # table positions
    n, c = x.shape[:2]
    k = w.shape[0]
    th, tw = _tile_grid(win, m)  # the last row and column may be partial
    # U[x, y] = G w G^T for every (k, c), as one product: the table positions' weights kron(G, G)
    # (size x 9) against the 3x3 taps of every filter, landing in U's layout (position, k, c).
    # ResNet-50's 512-channel filters: 0.09 s, against 0.34 as an einsum (Zen 3).
    u = (np.kron(f.g, f.g) @ w.array.astype(np.float64).reshape(k * c, 9).T).reshape(size, k, c)
    weights = cx.constant(u.astype(np.float32))
    reads_outside = win.padded or any(m * t + 2 > s for t, s in zip((th, tw), x.shape[2:], strict=True))
    pad = scalar(0, x.dtype).value if reads_outside else None

    # V = B^T d B in two passes, each a weighted sum of at most 4 values per position: the
    # columns' transform S[x, b] = sum_a B^T[x, a] d[a, b], then V[x, y] = sum_b B^T[y, b] S[x, b].
    # Each pass has the table's two axes apart, (n, c, x, y, tile row, tile column): its sum
    # depends on one of them (x, then y) and the other is an ordinary loop axis, so the kernel
    # runs side pieces, not side^2 (F4's input transform: 6 loop nests a pass where the 36 of
    # positions flattened into one axis took gcc 1.2-2.0 s a source, a third of ResNet-50's
    # cold compile). V is then viewed with its positions flattened, as the product reads them.
    i = out_index(6)

    def window(a: int) -> Load:  # element (a, b) of the tile's window, b the axis i[3]
        return load(0, x, [i[0], i[1], i[4] * idx(m) + idx(a - win.pad_begin[0]),
                           i[5] * idx(m) + i[3] + idx(-win.pad_begin[1])], pad=pad)
    body = _by_position(i[2], [[(window(a), f.bt[p, a]) for a in range(side)] for p in range(side)])
    columns = cx.emit(compute((n, c, side, side, th, tw), body, [x]), [x])
    i = out_index(6)
    body = _by_position(i[3], [[(load(0, columns, [i[0], i[1], i[2], idx(b), i[4], i[5]]), f.bt[q, b])
                                for b in range(side)] for q in range(side)])
    v = cx.view(cx.emit(compute((n, c, side, side, th, tw), body, [columns]), [columns]), (n, c, size, th, tw))

    i, (rc,) = out_index(5), reduce_index(1)
    body = load(0, weights, [i[1], i[2], rc]) * load(1, v, [i[0], rc, i[1], i[3], i[4]])
    products = cx.emit(compute((n, size, k, th, tw), body, [weights, v], reduce=[c], reduce_op="sum"), [weights, v])

    # Y = A^T M A in two passes likewise, the first with its table axes apart (n, k, i, b, tile
    # row, tile column), the second written interleaved: (n, k, tile row, position i, tile
    # column, position j), a view of the output.
    i = out_index(6)
    body = _by_position(i[2], [[(load(0, products, [i[0], idx(a * side) + i[3], i[1], i[4], i[5]]), f.at[p, a])
                                for a in range(side)] for p in range(m)])
    rows = cx.emit(compute((n, k, m, side, th, tw), body, [products]), [products])
    i = out_index(6)
    body = _by_position(i[5], [[(load(0, rows, [i[0], i[1], i[3], idx(b), i[2], i[4]]), f.at[pj, b])
                                for b in range(side)] for pj in range(m)])
    inputs = [rows]
    if bias is not None:
        body = body + load(1, bias, [i[1]])
        inputs.append(bias)
    y = cx.view(cx.emit(compute((n, k, th, m, tw, m), body, inputs), inputs), (n, k, th * m, tw * m))
    if (th * m, tw * m) == win.out:
        return y
    i = out_index(4)  # partial tiles: the outputs past the edge are cut off
    return cx.emit(compute((n, k, *win.out), load(0, y, i), [y]), [y])


def _by_position(position: Expr, sums: list[list[tuple[Expr, float]]]) -> Expr:
    """The weighted sum `sums[p]` where `position` is p: a select chain the C kernel runs
    range by range (compiler/codegen/c/kernel.py `_pieces`; the interleaved
    innermost position, c/turn.py `zipped_axis`)."""
    body: Expr | None = None
    for p in reversed(range(len(sums))):
        term = _weighted_sum(sums[p])
        body = term if body is None else select(call("lt", position, idx(p + 1)), term, body)
    assert body is not None
    return body


def _weighted_sum(terms: list[tuple[Expr, float]]) -> Expr:
    """The sum of the terms times their coefficients, those of 0 left out and those of +-1
    added or subtracted without a multiply (every row of the tables has a +1, first here)."""
    ordered = sorted((tc for tc in terms if tc[1]), key=lambda tc: tc[1] != 1)
    assert ordered and ordered[0][1] == 1
    value = ordered[0][0]
    for t, cf in ordered[1:]:
        if abs(cf) != 1:
            t = t * scalar(abs(cf), t)
        value = value + t if cf > 0 else value - t
    return value
