"""RNN, GRU and LSTM, unrolled over the (static) sequence.

Per direction, one Compute projects every step's input (X W^T + Wb, + Rb where
it can be folded in); per step a recurrence Compute forms H_{t-1} R^T and
element-wise Computes apply the gates. Y stacks the hidden states of the steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from compiler.frontend.exprs import compute, idx, load, out_index, reduce_index, scalar
from compiler.frontend.ops.constants import fill
from compiler.frontend.ops.movement import concat_values, slice_along
from compiler.frontend.registry import OpContext, Outputs, lowering
from compiler.frontend.values import Value
from compiler.ir.dtypes import INDEX
from compiler.ir.te import ACC, Expr, Var, call, cast, select

Activation = Callable[[Expr], Expr]


def _sigmoid(x: Expr) -> Expr:
    return scalar(1.0, x) / (scalar(1.0, x) + call("exp", -x))


# name -> (builder from (alpha, beta), default alpha, default beta); a None default takes no parameter
_ACTIVATIONS: dict[str, tuple[Callable[[float, float], Activation], float | None, float | None]] = {
    "Sigmoid": (lambda a, b: _sigmoid, None, None),
    "Tanh": (lambda a, b: lambda x: call("tanh", x), None, None),
    "Relu": (lambda a, b: lambda x: call("max", x, scalar(0, x)), None, None),
    "Softsign": (lambda a, b: lambda x: x / (scalar(1.0, x) + call("abs", x)), None, None),
    "Softplus": (lambda a, b: lambda x: call("log", call("exp", x) + scalar(1.0, x)), None, None),
    "Affine": (lambda a, b: lambda x: scalar(a, x) * x + scalar(b, x), 1.0, 0.0),
    "LeakyRelu": (lambda a, b: lambda x: select(call("lt", x, scalar(0, x)), scalar(a, x) * x, x), 0.01, None),
    "ThresholdedRelu": (lambda a, b: lambda x: select(call("gt", x, scalar(a, x)), x, scalar(0, x)), 1.0, None),
    "ScaledTanh": (lambda a, b: lambda x: scalar(a, x) * call("tanh", scalar(b, x) * x), 1.0, 1.0),
    "HardSigmoid": (lambda a, b: lambda x: call("max", scalar(0, x),
                                                call("min", scalar(1, x), scalar(a, x) * x + scalar(b, x))), 0.2, 0.5),
    "Elu": (lambda a, b: lambda x: select(call("lt", x, scalar(0, x)),
                                          scalar(a, x) * (call("exp", x) - scalar(1, x)), x), 1.0, None),
}

DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}


def _activations(cx: OpContext, directions: int) -> list[list[Activation]]:
    per = len(DEFAULT_ACTIVATIONS[cx.op])
    names = list(cx.attr("activations", list(DEFAULT_ACTIVATIONS[cx.op]) * directions))
    alphas, betas = list(cx.attr("activation_alpha", [])), list(cx.attr("activation_beta", []))
    if len(names) != per * directions:
        raise cx.error(f"expected {per * directions} activations, got {len(names)}")
    out: list[Activation] = []
    for name in names:
        if name not in _ACTIVATIONS:
            raise cx.unsupported(f"activation {name!r}")
        build, a, b = _ACTIVATIONS[name]
        a = alphas.pop(0) if a is not None and alphas else a
        b = betas.pop(0) if b is not None and betas else b
        out.append(build(a or 0.0, b or 0.0))
    return [out[d * per:(d + 1) * per] for d in range(directions)]


class Direction:
    """Builds the Computes of one direction `d`; gate k of a row of gates starts at k * hidden."""

    def __init__(self, cx: OpContext, d: int, hidden: int) -> None:
        self.cx, self.d, self.hidden = cx, d, hidden
        clip = cx.attr("clip")
        self.clip = None if clip is None else float(clip)

    def pre(self, e: Expr) -> Expr:
        """A gate's pre-activation, clipped when the node asks for it."""
        if self.clip is None:
            return e
        return call("min", call("max", e, scalar(-self.clip, e)), scalar(self.clip, e))

    def projection(self, x: Value, w: Value, b: Value | None, batch_first: bool, recurrent_bias: bool) -> Value:
        """xw[t, n, g] = sum_k X[t, n, k] W[d, g, k] + Wb[d, g] (+ Rb[d, g]) for every step at once."""
        seq, batch = (x.shape[1], x.shape[0]) if batch_first else x.shape[:2]
        width = w.shape[1]
        t, n, j = out_index(3)
        (r,) = reduce_index(1)
        body = load(0, x, [n, t, r] if batch_first else [t, n, r]) * load(1, w, [idx(self.d), j, r])
        inputs, post = [x, w], None
        if b is not None:
            acc: Expr = Var(ACC, body.dtype) + load(2, b, [idx(self.d), j])
            post = acc + load(2, b, [idx(self.d), j + idx(width)]) if recurrent_bias else acc
            inputs.append(b)
        c = compute((seq, batch, width), body, inputs, reduce=[x.shape[2]], reduce_op="sum", post=post)
        return self.cx.emit(c, inputs)

    def recurrence(self, h: Value, r: Value, gates: range, b: Value | None = None, scale: Value | None = None
                   ) -> Value:
        """rows[n, g] = sum_k (scale * H)[n, k] R[d, g, k] (+ Rb[d, g]) over `gates`."""
        batch = h.shape[0]
        g0 = gates.start * self.hidden
        n, j = out_index(2)
        (k,) = reduce_index(1)
        prev = load(0, h, [n, k])
        inputs = [h, r]
        if scale is not None:
            prev = prev * load(len(inputs), scale, [n, k])
            inputs.append(scale)
        body = prev * load(1, r, [idx(self.d), j + idx(g0), k])
        post = None
        if b is not None:
            width = r.shape[1]
            post = Var(ACC, body.dtype) + load(len(inputs), b, [idx(self.d), idx(width + g0) + j])
            inputs.append(b)
        c = compute((batch, len(gates) * self.hidden), body, inputs, reduce=[self.hidden], reduce_op="sum", post=post)
        return self.cx.emit(c, inputs)

    def cell(self, inputs: Sequence[Value], fn: Callable[[Callable[[int, int, int | None], Expr], list[Expr]], Expr]
             ) -> Value:
        """An element-wise [batch, hidden] step Compute.

        fn(get, i) builds the body; get(k, gate, t) loads input k at gate `gate`
        (None for a [batch, hidden] state) and step t (for the [seq, batch, gates] projection).
        """
        batch = inputs[0].shape[1] if inputs[0].rank == 3 else inputs[0].shape[0]
        n, j = out_index(2)

        def get(k: int, gate: int | None, t: int | None = None) -> Expr:
            v = inputs[k]
            col = j if gate is None else j + idx(gate * self.hidden)
            if v.rank == 3:
                return load(k, v, [idx(t if t is not None else 0), n, col])
            return load(k, v, [n, col])

        return self.cx.emit(compute((batch, self.hidden), fn(get, [n, j]), list(inputs)), list(inputs))


def _state(cx: OpContext, v: Value | None, d: int, batch: int, hidden: int, dt: str, batch_first: bool) -> Value:
    """Direction d's initial state ([batch, hidden]), zeros when not given."""
    if v is None:
        return fill(cx, (batch, hidden), 0.0, dt)
    axis = 1 if batch_first else 0
    return cx.view(slice_along(cx, v, axis, d, 1), (batch, hidden))


@lowering("RNN", "GRU", "LSTM")
def recurrent(cx: OpContext) -> Outputs:
    x, w, r, b = cx.input(0), cx.input(1), cx.input(2), cx.optional(3)
    lens, h0, c0, p = cx.optional(4), cx.optional(5), cx.optional(6), cx.optional(7)
    batch_first = bool(cx.attr("layout", 0))
    seq, batch = (x.shape[1], x.shape[0]) if batch_first else x.shape[:2]
    hidden = int(cx.attr("hidden_size", r.shape[-1]))
    cx.check_steps(seq)
    if lens is not None and lens.array is not None and np.all(lens.array == seq):
        lens = None  # every row runs the whole sequence
    direction = cx.attr("direction", "forward")
    dirs = [1] if direction == "reverse" else [0, 1] if direction == "bidirectional" else [0]
    acts = _activations(cx, len(dirs))
    lbr = bool(cx.attr("linear_before_reset", 0)) and cx.op == "GRU"
    steps_of_dirs: list[list[Value]] = []
    finals: list[tuple[Value, Value | None]] = []
    for d, backward in enumerate(dirs):
        u = Direction(cx, d, hidden)
        f = acts[d]
        xw = u.projection(x, w, b, batch_first, recurrent_bias=not lbr)
        h = _state(cx, h0, d, batch, hidden, x.dtype, batch_first)
        c = _state(cx, c0, d, batch, hidden, x.dtype, batch_first) if cx.op == "LSTM" else None
        hs: list[Value] = [h] * seq
        for t in (range(seq - 1, -1, -1) if backward else range(seq)):
            before = (h, c)
            if cx.op == "RNN":
                h = _rnn_step(u, f, xw, t, h, r)
            elif cx.op == "LSTM":
                h, c = _lstm_step(cx, u, f, xw, t, h, c, r, p)
            else:
                h = _gru_step(cx, u, f, xw, t, h, r, b if lbr else None, lbr)
            hs[t] = h
            if lens is not None:  # past a row's length: output zeros, state kept
                hs[t] = _within(cx, lens, t, h, None)
                h = _within(cx, lens, t, h, before[0])
                c = None if c is None else _within(cx, lens, t, c, before[1])
        steps_of_dirs.append(hs)
        finals.append((h, c))
    return _outputs(cx, steps_of_dirs, finals, batch_first, batch, hidden)


def _within(cx: OpContext, lens: Value, t: int, new: Value, other: Value | None) -> Value:
    """`new` in the batch rows whose sequence_lens exceed step t, `other` (zeros if None) in the rest.

    A reverse direction runs from the last step down: a row's steps past its length
    come first and keep the initial state, so its pass starts at its own last step.
    """
    n, j = out_index(2)
    inputs = [new, lens, *([other] if other is not None else [])]
    inside = call("lt", idx(t), cast(load(1, lens, [n]), INDEX))
    rest = scalar(0, new.dtype) if other is None else load(2, other, [n, j])
    return cx.emit(compute(new.shape, select(inside, load(0, new, [n, j]), rest), inputs), inputs)


def _rnn_step(u: Direction, f: list[Activation], xw: Value, t: int, h: Value, r: Value) -> Value:
    rec = u.recurrence(h, r, range(1))
    return u.cell([xw, rec], lambda g, i: f[0](u.pre(g(0, 0, t) + g(1, 0))))


def _lstm_step(cx: OpContext, u: Direction, f: list[Activation], xw: Value, t: int, h: Value, c: Value | None,
               r: Value, p: Value | None) -> tuple[Value, Value]:
    """Gates i, o, f, c (ONNX order); peepholes P = (i, o, f)."""
    assert c is not None
    rec = u.recurrence(h, r, range(4))
    coupled = bool(cx.attr("input_forget", 0))
    inputs = [xw, rec, c, *([p] if p is not None else [])]

    def peep(k: int, state: Expr, j: Expr) -> Expr:
        return load(3, p, [idx(u.d), j + idx(k * u.hidden)]) * state if p is not None else scalar(0, state)

    def new_c(g: Callable, i: list[Expr]) -> Expr:
        prev = g(2, None)
        gi = f[0](u.pre(g(0, 0, t) + g(1, 0) + peep(0, prev, i[1])))
        gf = scalar(1.0, gi) - gi if coupled else f[0](u.pre(g(0, 2, t) + g(1, 2) + peep(2, prev, i[1])))
        return gf * prev + gi * f[1](u.pre(g(0, 3, t) + g(1, 3)))

    c = u.cell(inputs, new_c)
    inputs = [xw, rec, c, *([p] if p is not None else [])]

    def new_h(g: Callable, i: list[Expr]) -> Expr:
        state = g(2, None)
        return f[0](u.pre(g(0, 1, t) + g(1, 1) + peep(1, state, i[1]))) * f[2](state)

    return u.cell(inputs, new_h), c


def _gru_step(cx: OpContext, u: Direction, f: list[Activation], xw: Value, t: int, h: Value, r: Value,
              b: Value | None, lbr: bool) -> Value:
    """Gates z, r, h (ONNX order)."""
    if lbr:  # h~ = g(x Wh + Wbh + r * (H Rh^T + Rbh)): the recurrence carries all of Rb
        rec = u.recurrence(h, r, range(3), b=b)

        def body(g: Callable, i: list[Expr]) -> Expr:
            z = f[0](u.pre(g(0, 0, t) + g(1, 0)))
            reset = f[0](u.pre(g(0, 1, t) + g(1, 1)))
            cand = f[1](u.pre(g(0, 2, t) + reset * g(1, 2)))
            return (scalar(1.0, z) - z) * cand + z * g(2, None)

        return u.cell([xw, rec, h], body)
    rec = u.recurrence(h, r, range(2))
    reset = u.cell([xw, rec], lambda g, i: f[0](u.pre(g(0, 1, t) + g(1, 1))))
    rec_h = u.recurrence(h, r, range(2, 3), scale=reset)

    def body(g: Callable, i: list[Expr]) -> Expr:
        z = f[0](u.pre(g(0, 0, t) + g(1, 0)))
        cand = f[1](u.pre(g(0, 2, t) + g(2, 0)))
        return (scalar(1.0, z) - z) * cand + z * g(3, None)

    return u.cell([xw, rec, rec_h, h], body)


def _outputs(cx: OpContext, steps: list[list[Value]], finals: list[tuple[Value, Value | None]], batch_first: bool,
             batch: int, hidden: int) -> Outputs:
    """Y [seq, dirs, batch, hidden] (batch first: [batch, seq, dirs, hidden]), Y_h and Y_c."""
    if batch_first:
        per_step = [cx.view(h, (batch, 1, 1, hidden)) for hs in steps for h in hs]
        seq = len(steps[0])
        by_dir = [concat_values(cx, per_step[k * seq:(k + 1) * seq], 1) for k in range(len(steps))]
        y = concat_values(cx, by_dir, 2)
        stack_axis, state_shape = 1, (batch, 1, hidden)
    else:
        by_dir = [concat_values(cx, [cx.view(h, (1, 1, batch, hidden)) for h in hs], 0) for hs in steps]
        y = concat_values(cx, by_dir, 1)
        stack_axis, state_shape = 0, (1, batch, hidden)
    y_h = concat_values(cx, [cx.view(h, state_shape) for h, _ in finals], stack_axis)
    y_c = None
    if cx.op == "LSTM":
        y_c = concat_values(cx, [cx.view(c, state_shape) for _, c in finals if c is not None], stack_axis)
    return [y, y_h, y_c]
