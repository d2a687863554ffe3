"""3x3 stride-1 convolutions lowered as Winograd F(2x2, 3x3): which ones may take it, that
the frontend asks its chooser (compiler/frontend/choices.py) and describes the convolution
for timing, and that both lowerings match onnxruntime through the frontend's interpreter
and through compiled kernels."""

import numpy as np
import onnx
import pytest
from frontend_kit import check_op, make_model, random
from onnx import helper, numpy_helper

from compiler.frontend import import_model
from compiler.frontend.choices import Choice, by_default
from compiler.frontend.ops.windows import Window
from compiler.frontend.ops.winograd import F2, F4, winograd_choice
from compiler.frontend.values import Value
from compiler.ir.te import Call, walk
from compiler.pipeline import compile_model

C = 64  # channels enough for the Winograd path (winograd.MIN_CHANNELS)


def _table_positions(x_shape, w_shape, choose=by_default, **attrs) -> int | None:
    """The batched matmul's count of table positions (16: F(2x2, 3x3), 36: F(4x4, 3x3)),
    None where the convolution runs direct."""
    node = helper.make_node("Conv", ["x", "w"], ["y"], **attrs)
    model = make_model([node], {"x": random(x_shape)}, ["y"], {"w": random(w_shape, seed=1)})
    graph = import_model(model, choose=choose)
    n, k = x_shape[0], w_shape[0]
    return next((nd.compute.shape[1] for nd in graph.nodes
                 if nd.compute.is_reduction and nd.compute.shape[:3:2] == (n, k) and nd.compute.shape[1] in (16, 36)),
                None)


def _take(_: Choice) -> bool:
    """The chooser that takes every alternative (Winograd below the untimed guess's size too)."""
    return True


def _uses_winograd(x_shape, w_shape, choose=by_default, **attrs) -> bool:
    return _table_positions(x_shape, w_shape, choose, **attrs) is not None


@pytest.mark.parametrize("x_shape,attrs,positions", [
    ((1, C, 28, 28), {"pads": [1, 1, 1, 1]}, 36),        # 7 x 7 tiles of 4 x 4
    ((2, C, 30, 30), {}, 36),                            # no padding: every window inside
    ((1, C, 29, 29), {"pads": [1, 0, 0, 1]}, 36),        # asymmetric
    ((1, C, 28, 28), {"auto_pad": "SAME_UPPER"}, 36),
    ((1, C, 14, 14), {"pads": [1, 1, 1, 1]}, 16),        # not a multiple of 4: 7 x 7 tiles of 2 x 2
    ((1, C, 16, 16), {"pads": [1, 1, 1, 1]}, 16),        # 4 x 4 tiles of 4 x 4 are too few
    ((2, C, 32, 30), {"pads": [1, 1, 1, 1]}, 16),        # 30 is no multiple of 4
    ((1, C, 27, 25), {"pads": [1, 1, 1, 1]}, 16),        # odd: the last tiles partial, cut off
    ((1, C, 7, 7), {"pads": [1, 1, 1, 1]}, 16),          # 4 x 4 tiles, all but one partial
])
@pytest.mark.parametrize("bias", [True, False])
def test_winograd_convolutions_match_onnxruntime(x_shape, attrs, positions, bias):
    assert _table_positions(x_shape, (C, C, 3, 3), _take, **attrs) == positions
    weights = {"w": random((C, C, 3, 3), seed=1, low=-0.2, high=0.2)}
    if bias:
        weights["b"] = random((C,), seed=2)
    check_op("Conv", {"x": random(x_shape)}, weights, choose=_take, **attrs)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, C, 28, 28), (C, C, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, C, 28, 28), (C, C, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, 16, 56, 56), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),    # too few channels
    ((1, C, 6, 6), (C, C, 3, 3), {"pads": [1, 1, 1, 1]}),         # too few tiles (9 of 2 x 2)
    ((1, C, 28, 28), (C, C // 2, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),
    ((1, C, 28, 28), (C, C, 5, 5), {"pads": [2, 2, 2, 2]}),
])
def test_other_convolutions_run_direct(x_shape, w_shape, attrs):
    assert not _uses_winograd(x_shape, w_shape, **attrs)


def test_the_chooser_is_asked_once_per_convolution_with_the_convolution_alone():
    asked: list[Choice] = []

    def decline(choice: Choice) -> bool:
        asked.append(choice)
        return False

    attrs = {"pads": [1, 0, 0, 1]}
    assert not _uses_winograd((2, C, 29, 29), (C, C, 3, 3), choose=decline, **attrs)
    assert [c.kind for c in asked] == ["winograd"] and asked[0].default is True
    alone = onnx.load_from_string(asked[0].model(1))
    onnx.checker.check_model(alone, full_check=True)
    (conv,) = alone.graph.node
    assert conv.op_type == "Conv" and {a.name: list(a.ints) for a in conv.attribute}["pads"] == [1, 0, 0, 1]
    shape = [d.dim_value for d in alone.graph.output[0].type.tensor_type.shape.dim]
    assert shape == [2, C, 28, 28]
    assert asked[0].weight_bytes == 4 * C * C * 9  # no bias
    # timed with its weights out of cache: copies that share the input (its output is smaller),
    # each with weights of its own
    three = onnx.load_from_string(asked[0].model(3))
    onnx.checker.check_model(three, full_check=True)
    assert [n.input[0] for n in three.graph.node] == ["x"] * 3 and len(three.graph.output) == 3
    weights = [numpy_helper.to_array(t) for t in three.graph.initializer]
    assert len(weights) == 3 and all(w.shape == (C, C, 3, 3) for w in weights)
    assert not np.array_equal(weights[0], weights[1])
    # the same convolution is the same question; the direct lowering is what a "no" gets
    _uses_winograd((2, C, 29, 29), (C, C, 3, 3), choose=decline, **attrs)
    assert asked[1].key == asked[0].key
    assert not _uses_winograd((1, 16, 56, 56), (16, 16, 3, 3), choose=decline, pads=[1, 1, 1, 1])
    assert len(asked) == 2  # a convolution Winograd does not fit is not asked about
    # from 7 x 7 on the machine is asked; untimed, the guess is direct below 28 x 28
    assert not _uses_winograd((1, C, 7, 7), (C, C, 3, 3), choose=decline, pads=[1, 1, 1, 1])
    assert len(asked) == 3 and asked[2].default is False and asked[0].default is True
    assert not _uses_winograd((1, C, 14, 14), (C, C, 3, 3), pads=[1, 1, 1, 1])
    assert _uses_winograd((1, C, 14, 14), (C, C, 3, 3), choose=lambda choice: True, pads=[1, 1, 1, 1])


@pytest.mark.parametrize("winograd", [True, False])
def test_both_compiled_lowerings_with_relu_validate(tmp_path, winograd):
    w = random((C, C, 3, 3), seed=1, low=-0.2, high=0.2)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, {"x": random((1, C, 28, 28))}, ["y"], {"w": w, "b": random((C,), seed=2)})
    # Not measured: what is asserted is the plan's structure, and a register group timed
    # against its parts on a loaded host (CI runs two test workers on two cores) can be
    # split back by a slow spell alone (CI: the direct Conv+Relu ran as two kernels).
    result = compile_model(model.SerializeToString(), "cpu", {"threads": 2, "measure": False},
                           output=tmp_path / "m.tar.gz", choose=lambda _: winograd)
    assert result.validation["passed"] is True and result.validation["rel_l2_error"] < 1e-5
    assert any(k["ops"] == ["Conv", "Relu"] for k in result.kernels) is not winograd  # direct: Relu fused
    assert result.report["choices"] == []  # told, not timed


@pytest.mark.parametrize("out_channels, chained", [(C, True), (2 * C, False)])
def test_copies_of_a_shape_keeping_convolution_are_timed_as_a_chain(out_channels: int, chained: bool) -> None:
    """Copies of a convolution that keeps its input's shape read each other's outputs, as a
    network's layers do (each input in cache, the intermediates reused); others read one input."""
    x = Value((1, C, 28, 28), "float32")
    w = Value.of_array(np.zeros((out_channels, C, 3, 3), np.float32))
    choice = winograd_choice(x, w, None, Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (28, 28)))
    graph = onnx.load_from_string(choice.model(3)).graph
    assert [n.input[0] for n in graph.node] == (["x", "y0", "y1"] if chained else ["x"] * 3)
    assert [o.name for o in graph.output] == (["y2"] if chained else ["y0", "y1", "y2"])
    assert ("chained" in choice.key) == chained  # a chain's answer is kept apart from the copies'
    onnx.checker.check_model(onnx.load_from_string(choice.model(3)), full_check=True)


@pytest.mark.parametrize("tables", [F2, F4], ids=["F2", "F4"])
def test_the_tables_compute_the_correlation(tables) -> None:
    """A^T [(G g) . (B^T d)] is the 3-tap correlation of d with g at m outputs."""
    rng = np.random.default_rng(0)
    d, g = rng.standard_normal(tables.m + 2), rng.standard_normal(3)
    want = [d[i:i + 3] @ g for i in range(tables.m)]
    np.testing.assert_allclose(tables.at @ ((tables.g @ g) * (tables.bt @ d)), want, rtol=1e-12, atol=1e-12)


def _is_select(e) -> bool:
    return isinstance(e, Call) and e.op == "select"


@pytest.mark.parametrize("x_shape,side", [((1, C, 28, 28), 6), ((1, C, 14, 14), 4)], ids=["F4", "F2"])
def test_each_transform_pass_selects_among_one_table_axis(x_shape, side) -> None:
    """Each pass of the transforms keeps the table's two axes apart and picks its weighted sum
    by one of them: at most `side` sums a pass (the C kernel runs one loop nest per sum), not
    one for each of the side^2 positions (F4: 36 nests a pass, a third of ResNet-50's cold compile)."""
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    model = make_model([node], {"x": random(x_shape)}, ["y"], {"w": random((C, C, 3, 3), seed=1)})
    transforms = [nd.compute for nd in import_model(model, choose=_take).nodes
                  if not nd.compute.is_reduction and any(_is_select(e) for e in walk(nd.compute.body))]
    assert len(transforms) == 4  # two passes of the input's transform, two of the output's
    assert all(sum(map(_is_select, walk(c.body))) < side for c in transforms)
