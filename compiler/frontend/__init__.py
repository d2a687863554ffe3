"""ONNX -> Graph of tensor-expression Computes: checks, shape binding, lowering of each op.

Public API: `import_model`, `inspect_model`, `check_model`, `Limits`, `ModelInfo`, `SUPPORTED_OPS`.

How a model goes through (one module per step):
- loader: parse, then the cheap refusals (size, external data, unknown ops, missing
  inputs, cycles, ranks / element counts / weight bytes), onnx.checker and shape
  inference; model_info.screen runs them all, inspect_model stops there.
- binding: runtime inputs get static shapes (symbolic dims from `input_shapes`).
- fusion: BatchNormalization folded into a preceding Conv where that is exact.
- importer: nodes in order; each op type has a lowering registered with
  `@lowering` in ops/ (one module per family); ops that onnx defines by a function
  body and that have no lowering go through functions.expand.
- builder: a Compute whose inputs are all constants (and small) is evaluated at
  once by the TE interpreter, which is how constant folding reuses lowering;
  values whose shapes decide other shapes must be constants by then
  (registry.DataDependentShapeError otherwise; specialize freezes such inputs).
- importer.bind_outputs gives every output storage of its own; prune drops dead nodes
  and unused weights.

No model-supplied string reaches a Compute: names are metadata on tensors and nodes.
"""

from compiler.frontend.importer import check_model, import_model
from compiler.frontend.limits import Limits
from compiler.frontend.model_info import ModelInfo, inspect_model
from compiler.frontend.ops import SUPPORTED_OPS

__all__ = ["SUPPORTED_OPS", "Limits", "ModelInfo", "check_model", "import_model", "inspect_model"]
