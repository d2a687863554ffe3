"""The IR's analyses and its numpy meaning."""

import numpy as np
import pytest

from compiler.ir import te
from compiler.ir.interp import evaluate
from compiler.ir.te import Axis, Compute, Load, TensorType, Tile, Var


def matmul(m: int, n: int, k: int) -> Compute:
    i, j, r = Var("i0"), Var("i1"), Var("r0")
    body = Load(0, (i, r), "float32") * Load(1, (r, j), "float32")
    return Compute(
        axes=(Axis("i0", m), Axis("i1", n)), body=body,
        inputs=(TensorType((m, k), "float32"), TensorType((k, n), "float32")),
        dtype="float32", reduce_axes=(Axis("r0", k),), reduce_op="sum", label="MatMul",
    )


def conv1d_padded(n: int, w: int, k: int, pad: int) -> Compute:
    o, r = Var("i0"), Var("r0")
    body = Load(0, (o + r - pad,), "float32", pad=0.0) * Load(1, (r,), "float32")
    return Compute(
        axes=(Axis("i0", w + 2 * pad - k + 1),), body=body,
        inputs=(TensorType((w,), "float32"), TensorType((k,), "float32")),
        dtype="float32", reduce_axes=(Axis("r0", k),), reduce_op="sum",
    )


def test_matmul_evaluates_like_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7), np.float32), rng.standard_normal((7, 3), np.float32)
    np.testing.assert_allclose(evaluate(matmul(5, 3, 7), [a, b]), a @ b, rtol=1e-5)


def test_padded_load_reads_pad_value():
    x, w = np.arange(6, dtype=np.float32), np.ones(3, np.float32)
    out = evaluate(conv1d_padded(1, 6, 3, 1), [x, w])
    np.testing.assert_allclose(out, np.convolve(x, w, mode="same"))


def test_region_is_clipped_interval_of_index_expressions():
    c = conv1d_padded(1, 16, 3, 1)
    box_x, box_w = te.region_of(c, Tile({"i0": 4, "r0": 3}))
    assert box_x == [(0, 4)]  # -1..4 clipped at 0
    assert box_w == [(0, 2)]


def test_region_of_matmul_tile():
    c = matmul(64, 64, 32)
    a, b = te.region_of(c, Tile({"i0": 8, "i1": 16, "r0": 32}, {"i0": 8}))
    assert a == [(8, 15), (0, 31)] and b == [(0, 31), (0, 15)]


def test_loads_are_walked_once_and_a_region_counts_each_distinct_load():
    i, r = Var("i0"), Var("r0")
    x = Load(0, (i + r,), "float32")
    shifted = Load(0, (i + r + 2,), "float32")
    c = Compute(axes=(Axis("i0", 8),), body=x * x + shifted, inputs=(TensorType((12,), "float32"),),
                dtype="float32", reduce_axes=(Axis("r0", 3),), reduce_op="sum")
    assert te.loads_of(c) == [x, x, shifted] and c.loads is c.loads  # kept on the instance
    assert c.distinct_loads == (x, shifted)
    assert te.region_of(c, Tile({"i0": 4, "r0": 3}, {"i0": 2})) == [[(2, 9)]]  # 2..7 and 4..9


def test_load_stride_ignores_a_non_affine_index_without_the_variable():
    """A nearest upsampling's row `h // 2` leaves its columns contiguous; an index that is
    not affine in the variable itself still has no stride."""
    from compiler.ir.affine import load_stride

    h, w = Var("i0"), Var("i1")
    rows = Load(0, (te.call("floordiv", h, te.Const(2, "int64")), w), "float32")
    assert load_stride(rows, (4, 8), "i1") == 1 and load_stride(rows, (4, 8), "i0") is None
    cols = Load(0, (h, te.call("floordiv", w, te.Const(2, "int64"))), "float32")
    assert load_stride(cols, (4, 8), "i1") is None and load_stride(cols, (4, 8), "i0") == 8


def test_bigger_tiles_move_fewer_bytes_in_total():
    c = matmul(256, 256, 256)
    small = te.traffic(c, Tile({"i0": 8, "i1": 8, "r0": 256}))
    big = te.traffic(c, Tile({"i0": 64, "i1": 64, "r0": 256}))
    assert big.total < small.total
    assert te.footprint(c, Tile({"i0": 64, "i1": 64, "r0": 256})) > te.footprint(
        c, Tile({"i0": 8, "i1": 8, "r0": 256}))


def test_canonical_serialization_round_trips_and_is_stable():
    c = conv1d_padded(1, 16, 3, 1)
    assert te.from_json(te.to_json(c)) == c
    assert c.canonical() == conv1d_padded(1, 16, 3, 1).canonical()
    assert c.canonical() != conv1d_padded(1, 16, 3, 2).canonical()


def test_mixed_dtypes_are_refused():
    with pytest.raises(TypeError):
        Load(0, (), "float32") + Load(1, (), "int64")


def test_reduce_with_post_expression_computes_mean():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = Compute(
        axes=(Axis("i0", 3),), body=Load(0, (Var("i0"), Var("r0")), "float32"),
        inputs=(TensorType((3, 4), "float32"),), dtype="float32",
        reduce_axes=(Axis("r0", 4),), reduce_op="sum", post=Var(te.ACC, "float32") / 4.0,
    )
    np.testing.assert_allclose(evaluate(c, [x]), x.mean(axis=1))


@pytest.mark.parametrize("k", te.SMALL_POWERS)
def test_small_integer_power_is_multiplies(k):
    x = Load(0, (Var("i0"),), "float32")
    e = te.call("pow", x, float(k))
    assert not any(isinstance(n, te.Call) and n.op == "pow" for n in te.walk(e))
    c = Compute(axes=(Axis("i0", 9),), body=e, inputs=(TensorType((9,), "float32"),), dtype="float32")
    v = np.array([-0.0, 0.0, 1.5, -3.25, np.inf, -np.inf, np.nan, 1e-13, 3e12], np.float32)
    got, want = evaluate(c, [v]), np.power(v.astype(np.float64), k).astype(np.float32)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_allclose(got, want, rtol=2 * 2.0 ** -23)


def test_other_powers_stay_calls():
    x = Load(0, (Var("i0"),), "float32")
    for k in (0.5, -1.0, 5.0):
        assert te.call("pow", x, k).op == "pow"
