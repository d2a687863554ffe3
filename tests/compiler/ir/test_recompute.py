"""Stages of a group recomputed where they are read (compiler/ir/recompute.py): which can
be, and that the group computes the same either way."""

from __future__ import annotations

import numpy as np
from onnx import helper

from compiler.frontend import import_model
from compiler.ir.interp import evaluate
from compiler.ir.recompute import recomputable, recompute
from compiler.ir.te import Load, loads_of
from compiler.schedule.tilegraph.registers import fuse
from compiler.schedule.tilegraph.rows import fuse_rows
from tests.compiler.schedule.test_fuse import model


def test_a_softmax_recomputes_its_exponentials_and_computes_the_same() -> None:
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", [4, 300])], ["y"])
    (node,) = fuse_rows(fuse(import_model(m.SerializeToString()))).nodes
    c = node.compute
    assert recomputable(c) == (1,)  # max, exp, sum: only the exponentials are element-wise
    r = recompute(c, (1,))
    exps = len(c.inputs) + 1
    assert not any(isinstance(x, Load) and x.input == exps for member in r.members() for x in loads_of(member))
    x = np.random.default_rng(1).standard_normal((4, 300)).astype(np.float32)
    np.testing.assert_array_equal(evaluate(r, [x]), evaluate(c, [x]))
