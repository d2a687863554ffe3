"""An interval check that every unpadded Load of a lowered graph stays in bounds,
whatever the data (data-dependent indices are unbounded unless clamped)."""

from __future__ import annotations

import math

from compiler.ir.graph import Graph
from compiler.ir.te import Call, Compute, Const, Expr, Load, Var, walk

INF = math.inf
Interval = tuple[float, float]


def _mul(a: Interval, b: Interval) -> Interval:
    products = [x * y if not (x == 0 or y == 0) else 0.0 for x in a for y in b]
    return min(products), max(products)


def interval(e: Expr, env: dict[str, Interval]) -> Interval:
    """Bounds of an index expression; loads (data) are unbounded."""
    if isinstance(e, Var):
        return env.get(e.name, (-INF, INF))
    if isinstance(e, Const):
        return float(e.value), float(e.value)
    if not isinstance(e, Call):
        return -INF, INF
    args = [interval(a, env) for a in e.args]
    op = e.op
    if op == "cast" or op == "floor" or op == "ceil" or op == "round":
        return args[0]
    if op == "select":
        return min(args[1][0], args[2][0]), max(args[1][1], args[2][1])
    if op == "neg":
        return -args[0][1], -args[0][0]
    if op == "abs":
        lo, hi = args[0]
        return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
    if op == "add":
        return args[0][0] + args[1][0], args[0][1] + args[1][1]
    if op == "sub":
        return args[0][0] - args[1][1], args[0][1] - args[1][0]
    if op == "mul":
        return _mul(args[0], args[1])
    if op == "min":
        return min(args[0][0], args[1][0]), min(args[0][1], args[1][1])
    if op == "max":
        return max(args[0][0], args[1][0]), max(args[0][1], args[1][1])
    if op in ("floordiv", "floormod") and args[1][0] == args[1][1] and args[1][0] > 0:
        d = args[1][0]
        if op == "floormod":
            return 0.0, d - 1
        return math.floor(args[0][0] / d) if args[0][0] > -INF else -INF, \
            math.floor(args[0][1] / d) if args[0][1] < INF else INF
    return -INF, INF


def out_of_bounds_loads(c: Compute) -> list[str]:
    """Descriptions of the unpadded loads of `c` whose index may leave the tensor."""
    env = {a.name: (0.0, float(a.extent - 1)) for a in c.all_axes()}
    bad = []
    for e in [c.body, *([c.post] if c.post is not None else [])]:
        for ld in walk(e):
            if not isinstance(ld, Load) or ld.pad is not None:
                continue
            shape = c.inputs[ld.input].shape
            for d, index in enumerate(ld.indices):
                lo, hi = interval(index, env)
                if lo < 0 or hi > shape[d] - 1:
                    bad.append(f"input {ld.input} dim {d} (extent {shape[d]}): index in [{lo}, {hi}]")
    return bad


def assert_loads_in_bounds(graph: Graph) -> None:
    problems = [f"{n.op}: {p}" for n in graph.nodes for p in out_of_bounds_loads(n.compute)]
    assert not problems, "\n".join(problems[:10])
