"""Lowerings of ONNX operators, one module per op family; importing this registers them all."""

from compiler.frontend.functions import function_ops
from compiler.frontend.ops import (  # noqa: F401  (imported for their registrations)
    constants,
    contraction,
    control,
    conv_transpose,
    deform,
    einsum,
    elementwise,
    grid_sample,
    integer,
    loss,
    movement,
    normalization,
    patches,
    pooling,
    quantize,
    recurrent,
    reduction,
    resize,
    roi_align,
    scatter,
    sequence,
    sorting,
    spectral,
)
from compiler.frontend.registry import LOWERINGS

# ops lowered through their ONNX function body, node by node
FUNCTION_OPS: frozenset[str] = function_ops(frozenset(LOWERINGS))
SUPPORTED_OPS: frozenset[str] = frozenset(LOWERINGS) | FUNCTION_OPS

__all__ = ["FUNCTION_OPS", "LOWERINGS", "SUPPORTED_OPS"]
