"""Index-set splitting (compiler/ir/index_split.py): where a body's conditions on one
variable change, and the body folded over a range of it."""

from __future__ import annotations

from compiler.ir.index_split import specialize, split_points
from compiler.ir.te import Call, Const, Load, Var, call, select

POS, CHAN = Var("i", "int64"), Var("j", "int64")


def n(v: int) -> Const:
    return Const(v, "int64")


def concat_body() -> Call:
    """Two parts of 4 and 6 positions along i, each read at a clamped index."""
    first = Load(0, (CHAN, call("min", call("max", POS, n(0)), n(3))), "float32")
    second = Load(1, (CHAN, call("min", call("max", call("sub", POS, n(4)), n(0)), n(5))), "float32")
    return select(call("lt", POS, n(4)), first, second)


def test_split_points_are_where_a_condition_changes() -> None:
    assert split_points(concat_body(), "i", 10) == [4]
    assert split_points(call("ge", n(5), POS), "i", 10) == [6]  # 5 >= i: true up to 5
    assert split_points(call("gt", call("neg", POS), n(-3)), "i", 10) == [3]  # -i > -3: i < 3
    assert split_points(call("lt", POS, n(40)), "i", 10) == []  # decided over the whole extent


def test_conditions_on_other_variables_or_several_give_no_split_points() -> None:
    assert split_points(call("lt", POS, CHAN), "i", 10) == []
    assert split_points(call("lt", call("mul", POS, n(2)), n(7)), "i", 10) == []


def test_specialize_folds_a_concat_to_one_affine_load_per_part() -> None:
    body, env = concat_body(), {"j": (0, 7)}
    assert specialize(body, {**env, "i": (0, 3)}) == Load(0, (CHAN, POS), "float32")
    assert specialize(body, {**env, "i": (4, 9)}) == Load(1, (CHAN, call("sub", POS, n(4))), "float32")
    straddling = specialize(body, {**env, "i": (2, 6)})  # both parts: the select stays
    assert isinstance(straddling, Call) and straddling.op == "select" and straddling.args[0] == body.args[0]
    assert straddling.args[1] == Load(0, (CHAN, call("min", POS, n(3))), "float32")  # i >= 0 there: max folded
