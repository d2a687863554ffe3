"""Workarounds for toolchain bugs, applied to generated C; each says what it works around.

gcc 12.2 (Debian 12.2.0-14) at -O3 with AVX2 (-march=znver3 / x86-64-v3) miscompiles
the reduce loops of padded-window kernels once it if-converts their bounds checks
and vectorizes across the reduce axis: AveragePool 5x5 with pads 2 on a 5x5 input
produced wrong sums on border outputs (the ONNX node tests
averagepool_2d_precomputed_pads*), while -O2, plain -O3 (SSE2) and
-fno-tree-loop-if-convert are right. Turning if-conversion off for the whole
build costs up to 10x on element-wise kernels (their selects stop vectorizing),
so only kernels whose loops read padded loads with bounds checks get it; their
interiors carry no conditionals and vectorize as before. Kernels on the packed GEMM
path (c/gemm.py) and those whose windows are staged in scratch (c/stage.py) have
no such loads left: their copies are clipped runs, their reduce loops unchecked,
and their epilogues (a ReLU's NaN-propagating select) vectorize only with
if-conversion.
"""

from __future__ import annotations

from compiler.ir.te import Compute, Load, loads_of

NO_IF_CONVERT = '#pragma GCC optimize ("no-tree-loop-if-convert")'


def has_padded_loads(compute: Compute) -> bool:
    """Whether any load of `compute` reads with a pad (bounds-checked windows)."""
    return any(isinstance(ld, Load) and ld.pad is not None for ld in loads_of(compute))


def apply_workarounds(source: str, checked_padded_loads: bool) -> str:
    """`source` (one C translation unit) with the workarounds it needs;
    `checked_padded_loads`: whether its loops read padded loads with bounds checks."""
    if checked_padded_loads:
        return f"{NO_IF_CONVERT}\n{source}"
    return source
