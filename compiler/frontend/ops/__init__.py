"""Lowerings of ONNX operators, one module per op family; importing this registers them all."""

from compiler.frontend.ops import (  # noqa: F401  (imported for their registrations)
    constants,
    contraction,
    elementwise,
    movement,
    normalization,
    pooling,
    reduction,
    resize,
)
from compiler.frontend.registry import LOWERINGS

SUPPORTED_OPS: frozenset[str] = frozenset(LOWERINGS)

__all__ = ["LOWERINGS", "SUPPORTED_OPS"]
