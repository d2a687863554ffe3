"""Builds generated C kernels into one shared library and calls them on numpy arrays."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from compiler.build.gcc import c_flags, compile_objects, link_shared
from compiler.codegen.c.kernel import prepacked_inputs, render_kernel
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute
from compiler.runtime.executable import aligned_empty
from compiler.schedule.plan import TileConfig
from compiler.target.base import Target


class KernelLibrary:
    """Kernels compiled together (one gcc batch, one .so), callable by symbol."""

    def __init__(self, kernels: Mapping[str, tuple[Compute, TileConfig]], folder: Path,
                 targets: Mapping[str, Target] | None = None,
                 constants: Mapping[str, tuple[int, ...]] | None = None) -> None:
        """`targets`: the ISA some kernels are rendered for (default the build machine);
        `constants`: a kernel's inputs that are weights (read packed where the kernel can)."""
        self.kernels = dict(kernels)
        targets = targets or {}
        constants = constants or {}
        self.sources = {sym: render_kernel(c, t, sym, targets.get(sym), constants.get(sym, ()))
                        for sym, (c, t) in self.kernels.items()}
        self.packed = {sym: prepacked_inputs(c, t, targets.get(sym), constants.get(sym, ()))
                       for sym, (c, t) in self.kernels.items()}
        flags = c_flags()
        objects = compile_objects(self.sources, flags)
        path = folder / "kernels.so"
        path.write_bytes(link_shared(list(objects.values()), {}, flags))
        self.lib = ctypes.CDLL(str(path))

    def run(self, symbol: str, inputs: Sequence[np.ndarray]) -> np.ndarray:
        """Call kernel `symbol` on `inputs`; returns the freshly allocated output."""
        compute = self.kernels[symbol][0]
        arrays = [np.ascontiguousarray(x, dtype=dtype(t.dtype).np_type)
                  for x, t in zip(inputs, compute.inputs, strict=True)]
        out = np.empty(compute.shape, dtype(compute.dtype).np_type)
        out.reshape(-1).view(np.uint8).fill(0xA5)  # garbage: an element the kernel skips shows
        for pos, nbytes in self.packed[symbol].items():  # what tf_prepare does at load
            packed = aligned_empty((nbytes // 4,), np.float32)
            pack = getattr(self.lib, f"{symbol}_pack{pos}")
            pack.restype, pack.argtypes = None, [ctypes.c_void_p, ctypes.c_void_p]
            pack(packed.ctypes.data, arrays[pos].ctypes.data)
            arrays[pos] = packed
        fn = getattr(self.lib, symbol)
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * (1 + len(arrays))
        fn(out.ctypes.data, *(a.ctypes.data for a in arrays))
        return out
