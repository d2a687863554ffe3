"""Builds generated C kernels into one shared library and calls them on numpy arrays."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from compiler.aligned import aligned_empty
from compiler.build.gcc import c_flags, compile_objects, link_shared
from compiler.build.sandbox import run_tool
from compiler.codegen.c.kernel import build_machine, render_kernel
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute
from compiler.schedule.cpu_tile import plan_cpu_tile
from compiler.schedule.plan import TileConfig
from compiler.schedule.prepack import prepacked_inputs
from compiler.target.base import Target


def listing(source: str, march: str) -> str:
    """objdump's listing of C `source` built as the backend builds kernels, for `march`."""
    (obj,) = compile_objects({"k": source}, (*c_flags(), f"-march={march}")).values()
    return run_tool(["objdump", "-d", "--no-show-raw-insn", "k.o"], {"k.o": obj}, ()).stdout


def planned(c: Compute, tile: TileConfig, target: Target | None = None,
            constant_inputs: Sequence[int] = ()) -> TileConfig:
    """`tile` as the C backend's tile step completes it (the GEMM blocking and row-group
    member tiles decided for `target`, default the build machine), unless it is
    completed already (a test's own blocking or member tiles)."""
    if tile.gemm is not None or tile.members:
        return tile
    return plan_cpu_tile(c, tile, target or build_machine(), constant_inputs)


def render_planned(c: Compute, tile: TileConfig, symbol: str, target: Target | None = None,
                   constant_inputs: Sequence[int] = ()) -> str:
    """The kernel's source with `tile` completed (`planned`) first, as the pipeline renders it."""
    return render_kernel(c, planned(c, tile, target, constant_inputs), symbol, target)


class KernelLibrary:
    """Kernels compiled together (one gcc batch, one .so), callable by symbol."""

    def __init__(self, kernels: Mapping[str, tuple[Compute, TileConfig]], folder: Path,
                 targets: Mapping[str, Target] | None = None,
                 constants: Mapping[str, tuple[int, ...]] | None = None, plan: bool = True) -> None:
        """`targets`: the ISA some kernels are rendered for (default the build machine);
        `constants`: a kernel's inputs that are weights (read packed where the kernel can).
        Tiles are completed as the C backend's tile step does (`planned`), or with `plan`
        False rendered as given (a test's own plan decisions)."""
        targets = targets or {}
        constants = constants or {}
        self.kernels = {sym: (c, planned(c, t, targets.get(sym), constants.get(sym, ())) if plan else t)
                        for sym, (c, t) in kernels.items()}
        self.sources = {sym: render_kernel(c, t, sym, targets.get(sym)) for sym, (c, t) in self.kernels.items()}
        self.packed = {sym: prepacked_inputs(t) for sym, (_, t) in self.kernels.items()}
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
