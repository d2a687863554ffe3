"""ONNX -> Graph of tensor-expression Computes: checks, shape binding, lowering of each op.

Public API: `import_model`, `inspect_model`, `Limits`, `ModelInfo`, `SUPPORTED_OPS`.
"""

from compiler.frontend.importer import import_model
from compiler.frontend.limits import Limits
from compiler.frontend.model_info import ModelInfo, inspect_model
from compiler.frontend.ops import SUPPORTED_OPS

__all__ = ["SUPPORTED_OPS", "Limits", "ModelInfo", "import_model", "inspect_model"]
