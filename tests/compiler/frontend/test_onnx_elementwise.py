"""Element-wise lowerings against onnxruntime."""

import numpy as np
import pytest
from frontend_kit import check_op, random

UNARY = ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Sign", "Sin",
         "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Softplus", "Softsign", "HardSwish", "Round", "Mish"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op):
    check_op(op, {"x": random((3, 4, 5))})


@pytest.mark.parametrize("op,low,high", [("Log", 0.1, 5), ("Sqrt", 0, 5), ("Asin", -0.9, 0.9),
                                         ("Acos", -0.9, 0.9), ("Atanh", -0.9, 0.9), ("Acosh", 1, 5)])
def test_unary_on_its_domain(op, low, high):
    check_op(op, {"x": random((4, 5), low=low, high=high)})


@pytest.mark.parametrize("op,attrs", [
    ("LeakyRelu", {"alpha": 0.2}), ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 1.5}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("ThresholdedRelu", {"alpha": 0.5}),
    ("Shrink", {"lambd": 0.8, "bias": 0.3}),
])
def test_unary_with_attributes(op, attrs):
    check_op(op, {"x": random((2, 3, 4))}, **attrs)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    check_op("Gelu", {"x": random((4, 8))}, opset=20, approximate=approximate)


@pytest.mark.parametrize("shapes", [((2, 3, 4), (3, 1)), ((1,), (2, 3)), ((), (2,)), ((4, 1, 5), (1, 3, 1))])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_broadcasting_arithmetic(op, shapes):
    a, b = random(shapes[0], seed=1), random(shapes[1], seed=2, low=0.5, high=3)
    check_op(op, {"a": a, "b": b})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
def test_integer_arithmetic(op):
    check_op(op, {"a": random((3, 4), np.int64, 1, -50, 50), "b": random((4,), np.int64, 2, -50, 50)})


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons(op):
    check_op(op, {"a": random((3, 4), np.int64, 1, -2, 2), "b": random((4,), np.int64, 2, -2, 2)})
    check_op(op, {"a": random((3, 4), seed=3), "b": random((3, 1), seed=4)})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    check_op(op, {"a": random((3, 4), bool, 1), "b": random((4,), bool, 2)})


def test_not():
    check_op("Not", {"x": random((5,), bool)})


def test_pow_with_integer_exponent():
    check_op("Pow", {"x": random((3, 4), low=0.5, high=2), "e": np.array([2, 3, -1, 0], np.int64)})
    check_op("Pow", {"x": random((3, 4), low=0.5, high=2), "e": random((1, 4), seed=5, low=-2, high=2)})


@pytest.mark.parametrize("e", [np.float32(3), np.full((1, 4), 2, np.int64), np.float32(4), np.float32(0.5)])
def test_pow_with_constant_exponent(e):
    """A uniform constant exponent is a literal (small integer ones become multiplies)."""
    check_op("Pow", {"x": random((3, 4), low=0.5, high=2)}, {"e": np.asarray(e)})


@pytest.mark.parametrize("e", [np.float32(2), np.array([3], np.int64), np.full((1, 1, 1), 2, np.float32)])
def test_pow_by_a_constant_small_power(e):
    """Constant exponents 2 and 3 lower to products (the last widens the output's rank: the general pow)."""
    check_op("Pow", {"x": random((3, 4), low=-2, high=2)}, {"e": e})


def test_mod():
    check_op("Mod", {"a": random((6,), np.int64, 1, -9, 9), "b": np.array([3, -3, 4, -4, 5, 7], np.int64)})
    check_op("Mod", {"a": random((6,), seed=1), "b": random((6,), seed=2, low=0.5, high=2)}, fmod=1)


def test_where_broadcasts_three_ways():
    check_op("Where", {"c": random((3, 1), bool), "x": random((1, 4), seed=1), "y": random((3, 4), seed=2)})


def test_clip_as_attributes_and_inputs():
    check_op("Clip", {"x": random((3, 4))}, opset=10, min=-1.0, max=0.5)
    check_op("Clip", {"x": random((3, 4))}, {"lo": np.float32(-1), "hi": np.float32(0.5)}, opset=13)
    check_op("Clip", {"x": random((3, 4))}, {"hi": np.float32(0.5)}, opset=13, input_order=["x", "", "hi"])
    check_op("Clip", {"x": random((3, 4)), "lo": np.array(-0.2, np.float32)}, opset=13)


@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
def test_variadic_broadcasting(op):
    check_op(op, {"a": random((2, 3, 4), seed=1), "b": random((3, 1), seed=2), "c": random((4,), seed=3)})
    check_op(op, {"a": random((2, 3), seed=1)})


@pytest.mark.parametrize("src,to", [(np.float32, 7), (np.float32, 9), (np.int64, 1), (bool, 1), (np.int32, 7),
                                    (np.float32, 6)])
def test_cast(src, to):
    check_op("Cast", {"x": random((3, 4), src, 1, -4, 4)}, to=to)


def test_prelu_broadcasts_slope():
    check_op("PRelu", {"x": random((2, 3, 4, 4))}, {"slope": random((3, 1, 1), seed=1, low=0, high=1)})
