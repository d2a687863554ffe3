"""Which narrow innermost axes the C backend zips: computes each of their few positions as
vectors along the next axis and interleaves them into whole output vectors
(compiler/codegen/c/turn.py `zipped_axis`). The frontend shapes a nearest-neighbour
upsampling's repeats to fit (compiler/frontend/ops/resize.py), so both layers ask here.
"""

from __future__ import annotations

ZIPPED_WIDTHS = (2, 4)  # positions interleaved: two or four float32 vectors into whole ones
ZIPPED_DTYPE = "float32"


def zips(dtype: str, width: int) -> bool:
    """Whether an innermost axis of `width` positions of element type `dtype` is zipped."""
    return dtype == ZIPPED_DTYPE and width in ZIPPED_WIDTHS
