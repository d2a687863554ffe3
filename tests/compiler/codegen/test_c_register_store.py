"""GEMMs store each micro-kernel block to `out` as it is computed, post applied on the
vectors (c/gemm.py `stores_from_registers`), instead of through the C tile in scratch and
an epilogue pass: where K is one block from a block of the micro-kernel's own, where it
takes several from the C tile after the last K block's call. Row and vector tails, a bias
along rows or columns, a residual, a transcendental post, a 1x1 convolution, a batch of
heads, on 8 and 16 lanes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_harness import KernelLibrary
from test_c_gemm import cpu, matmul_gelu_bias
from test_c_kernels import axes, i0, i1, i2, i3, linear_relu, matmul, r0, rand

from compiler.ir.interp import evaluate
from compiler.ir.te import Compute, Load, TensorType, Var, call
from compiler.schedule.tiling import default_tile

LOCAL_CALL = "_local(kc,"  # a micro-kernel writing its own block
EPILOGUE = "ct[i * "  # the epilogue pass over the C tile


def conv1x1_clip_residual(size: int = 8, width: int = 14, cin: int = 16, cout: int = 24) -> Compute:
    """x (1,cin,size,width) 1x1-conv w (cout,cin), then clip(acc + bias, 0, 6) + residual."""
    body = Load(0, (i0, r0, i2, i3), "float32") * Load(1, (i1, r0), "float32")
    z = Var("acc", "float32") + Load(2, (i1,), "float32")
    post = call("min", call("max", z, 0.0), 6.0) + Load(3, (i0, i1, i2, i3), "float32")
    shape = (1, cout, size, width)
    return Compute(axes(*shape), body, (TensorType((1, cin, size, width), "float32"), TensorType((cout, cin), "float32"),
                   TensorType((cout,), "float32"), TensorType(shape, "float32")),
                   "float32", axes(cin, prefix="r"), "sum", post, "Conv+Clip+Add")


def batched_scores(batch: int = 3, rows: int = 40, cols: int = 48, depth: int = 24) -> Compute:
    """Q (batch, rows, depth) @ K^T (batch, cols, depth), scaled: attention scores per head."""
    body = Load(0, (i0, i1, r0), "float32") * Load(1, (i0, i2, r0), "float32")
    return Compute(axes(batch, rows, cols), body, (TensorType((batch, rows, depth), "float32"),
                   TensorType((batch, cols, depth), "float32")), "float32", axes(depth, prefix="r"), "sum",
                   Var("acc", "float32") * 0.125, "MatMul+Mul")


STORED: dict[str, tuple[Compute, int]] = {
    "row_tail": (matmul(59, 96, 30), 16),  # 14-row panels: 3 rows in the last
    "vector_tail": (matmul(37, 80, 24), 16),  # 80 = two 32-column panels and one vector
    "relu_avx2": (linear_relu(50, 72, 33), 8),  # tasks of 5 row panels
    "tall_row_tail": (matmul(203, 128, 48), 16),
    "gelu_bias_columns": (matmul_gelu_bias(37, 64, 24), 16),
    "conv1x1_clip_residual": (conv1x1_clip_residual(), 16),  # 8 x 14 positions: 7 vectors
    "conv1x1_clip_residual_avx2": (conv1x1_clip_residual(12, 12, 24, 40), 8),
    "batched_heads": (batched_scores(), 16),
}
STORED_AFTER_K_BLOCKS: dict[str, tuple[Compute, int]] = {  # sums carried in the C tile
    "k_blocks": (matmul(50, 64, 2 * 256 + 7), 8),  # K in three blocks
    "k_blocks_row_tail": (matmul(59, 96, 2 * 256 + 7), 16),  # 14-row panels: 3 rows in the last
    "k_blocks_gelu_bias": (matmul_gelu_bias(37, 64, 2 * 256 + 7), 16),
    "k_blocks_batched_heads": (batched_scores(2, 20, 48, 2 * 256 + 7), 8),
}
THROUGH_SCRATCH: dict[str, tuple[Compute, int]] = {
    "partial_vector": (matmul(30, 70, 20), 8),  # 70 columns: the last vector would be cut
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    cases = {**STORED, **STORED_AFTER_K_BLOCKS, **THROUGH_SCRATCH}
    return KernelLibrary({name: (c, default_tile(c, cpu(lanes))) for name, (c, lanes) in cases.items()},
                         Path(tmp_path_factory.mktemp("stored")), {name: cpu(lanes) for name, (_, lanes) in cases.items()})


def check(library: KernelLibrary, name: str, compute: Compute) -> None:
    inputs = [rand(t.shape) for t in compute.inputs]
    k = np.prod([a.extent for a in compute.reduce_axes])
    np.testing.assert_allclose(library.run(name, inputs), evaluate(compute, inputs), rtol=1e-5, atol=1e-5 * k)


@pytest.mark.parametrize("name", list(STORED))
def test_one_block_of_k_is_stored_as_computed(library: KernelLibrary, name: str) -> None:
    source = library.sources[name]
    assert LOCAL_CALL in source and EPILOGUE not in source
    check(library, name, STORED[name][0])


@pytest.mark.parametrize("name", list(STORED_AFTER_K_BLOCKS))
def test_several_k_blocks_are_stored_after_the_last(library: KernelLibrary, name: str) -> None:
    source = library.sources[name]
    assert LOCAL_CALL not in source and EPILOGUE not in source and "if (k0 + kc >= 519L)" in source
    check(library, name, STORED_AFTER_K_BLOCKS[name][0])


@pytest.mark.parametrize("name", list(THROUGH_SCRATCH))
def test_other_gemms_keep_the_c_tile_and_its_epilogue(library: KernelLibrary, name: str) -> None:
    source = library.sources[name]
    assert LOCAL_CALL not in source and EPILOGUE in source
    check(library, name, THROUGH_SCRATCH[name][0])
