"""Lowerings with an alternative, chosen by whoever can time them.

Where the frontend has two ways to lower an op and which one runs faster depends on the
machine, it asks its caller (a `Chooser`) instead of assuming. Winograd's F(2x2, 3x3)
(compiler/frontend/ops/winograd.py) is the first: one 64-channel 3x3 convolution on
56 x 56 ran 10% faster that way on a Zen 5 and 32% slower on an Emerald Rapids Xeon
(its larger intermediates pass through a slower L3 there, where the direct convolution
reads its input in place). The pipeline times both lowerings of the op alone, as cuDNN's
"find" times convolution algorithms (compiler/pipeline.py `_Compilation.choose`); where
nothing can be timed (no chooser, another machine's target, measuring off) the
frontend's own guess, `Choice.default`, stands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    """One op's alternative lowering: `kind` names it, `key` is the op's signature (equal
    keys get one answer in a compile), `default` is taken where nothing is timed, and
    `model(copies)` builds an ONNX model on which the two lowerings can be timed: `copies`
    instances of the op, each with random weights of its own (of `weight_bytes` bytes),
    reading one input or, where the op keeps its input's shape, each the output of the one
    before (compiler/frontend/ops/winograd.py), so that the op can be timed with its weights out of cache, as it
    runs in a model whose weights do not fit there."""

    kind: str
    key: str
    default: bool
    model: Callable[[int], bytes]
    weight_bytes: int


Chooser = Callable[[Choice], bool]  # True: take the alternative


def by_default(choice: Choice) -> bool:
    """The chooser that times nothing: the frontend's own guess."""
    return choice.default
