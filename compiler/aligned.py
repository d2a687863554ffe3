"""Memory that generated kernels may read with aligned vector loads: the alignment that the
planner's offsets, the weights blob and the runtimes' buffers share, in a leaf module that
the scheduler and the runtimes both import; and the powers of two that sizes are rounded
to (the cost model and the CUDA launches round alike)."""

from __future__ import annotations

import ctypes
import math

import numpy as np

# Bytes; outputs, weights and the arena start on it (packed panels and scratch are read
# with aligned vector loads). Inputs need only their dtype's natural alignment: no
# kernel assumes more of them, and copying a misaligned but usable input cost more
# than most kernels (a 1.8 MB feature map: 150 us against a 400 us convolution).
ALIGNMENT = 64


def data_address(a: np.ndarray) -> int:
    """The address of a C-contiguous array's first element.

    A writable array's comes through the buffer protocol, about 3x faster than
    `a.ctypes.data` (which builds a helper object): a run asks for one per input
    and output, and small models run in a few microseconds.
    """
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.ctypes.data


def aligned_empty(shape: tuple[int, ...], dt: np.dtype | str) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an ALIGNMENT boundary."""
    return aligned_buffer(shape, np.dtype(dt))[0]


def aligned_buffer(shape: tuple[int, ...], dt: np.dtype) -> tuple[np.ndarray, int]:
    """`aligned_empty` and the address of its data (which a run passes on as it is)."""
    raw = np.empty(math.prod(shape) * dt.itemsize + ALIGNMENT, np.uint8)
    address = data_address(raw)
    offset = -address % ALIGNMENT
    return np.ndarray(shape, dt, raw, offset), address + offset


def pow2_at_most(n: int) -> int:
    """The largest power of two <= n (1 for n < 1)."""
    return 1 << (max(1, n).bit_length() - 1)


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (1 for n < 1)."""
    return 1 << max(0, (max(1, n) - 1).bit_length())
