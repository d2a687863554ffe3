"""The cap on a model's ONNX nodes, shared by the frontend (compiler/frontend/limits.py) and
the service's settings (server/core/config.py) without either importing the other's layer:
a leaf module, so that reading the settings does not load the frontend and onnx."""

from __future__ import annotations

import os

# The service's setting of the same name reaches its workers and `tileforge compile` through it.
MAX_NODES_VARIABLE = "TILEFORGE_MAX_MODEL_NODES"
DEFAULT_MAX_NODES = 100_000


def max_nodes_from_environment() -> int:
    """TILEFORGE_MAX_MODEL_NODES where it is set, else the default cap."""
    return int(os.environ.get(MAX_NODES_VARIABLE, DEFAULT_MAX_NODES))
