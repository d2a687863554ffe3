"""The caps a model must fit under before any heavy work is done on it."""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.node_cap import max_nodes_from_environment


@dataclass(frozen=True)
class Limits:
    """Refusal thresholds for uploaded models (all checked before lowering).

    `max_fold_work` bounds compile-time constant folding: a node whose inputs
    are all constant is evaluated by the numpy interpreter only when its index
    space (outputs x reduce extent) is at most this; larger ones stay kernels.
    `max_fold_total` caps the folding work of a whole model (past it, constant
    nodes stay kernels, so a model of many constant nodes cannot stall import).
    `max_nodes` caps the ONNX nodes, subgraphs included (TILEFORGE_MAX_MODEL_NODES).
    `max_kernels` bounds the lowered graph (unrolled loops and recurrences) and
    `max_unrolled_steps` the iterations of one unrolled Loop, Scan or RNN.
    """

    max_model_bytes: int = (1 << 31) - 1
    max_rank: int = 8
    max_tensor_elements: int = 1 << 28
    max_weight_bytes: int = 1 << 30
    max_nodes: int = field(default_factory=max_nodes_from_environment)
    max_fold_work: int = 1 << 20
    max_fold_total: int = 1 << 24
    max_kernels: int = 200_000
    max_unrolled_steps: int = 10_000
