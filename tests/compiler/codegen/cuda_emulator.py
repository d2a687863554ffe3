"""Runs generated CUDA kernels on the CPU, one std::thread per CUDA thread.

For checking the kernels' logic where no GPU exists: the CUDA built-ins the
generated code uses are defined in a small C++20 header (blocks run one after
another; `__syncthreads` is a block-wide std::barrier; a warp shuffle is two
block-wide barriers around a slot exchange, which is exact because every
generated kernel reaches each shuffle with the whole block). The kernels'
text is compiled by g++ unchanged (float16 as g++'s `_Float16`).
"""

from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from compiler.codegen.cuda.expr import storage_ctype
from compiler.codegen.cuda.kernel import planned_launch, render_kernel
from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute
from compiler.schedule.cuda_tile import plan_cuda_tile
from compiler.schedule.plan import TileConfig

# What the generated source needs from CUDA, for g++. `cuda_fp16.h` is the
# first header the kernels include, so this file stands in for it.
SHIM = r"""#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* tf_block_barrier;
static inline void __syncthreads() { tf_block_barrier->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
struct __half {
  _Float16 v;
  operator float() const { return (float)v; }
};
static inline float __half2float(__half h) { return (float)h.v; }
static inline __half __float2half(float f) { return __half{(_Float16)f}; }
struct float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static unsigned long long tf_slots[1024];
template <class T> T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  unsigned long long word = 0;
  std::memcpy(&word, &v, sizeof(T));
  tf_slots[threadIdx.x] = word;
  __syncthreads();
  word = tf_slots[threadIdx.x ^ lane_mask];
  __syncthreads();
  T out;
  std::memcpy(&out, &word, sizeof(T));
  return out;
}
"""

_LAUNCHER = """
extern "C" void launch_{sym}(unsigned grid, unsigned block, void** args) {{
  gridDim = {{grid, 1, 1}};
  blockDim = {{block, 1, 1}};
  std::barrier<> barrier(block);
  tf_block_barrier = &barrier;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; ++t)
    threads.emplace_back([=] {{
      threadIdx = {{t, 0, 0}};
      for (unsigned b = 0; b < grid; ++b) {{
        blockIdx = {{b, 0, 0}};
        {sym}({args});
        __syncthreads();
      }}
    }});
  for (auto& th : threads) th.join();
}}
"""


class EmulatedKernels:
    """CUDA kernels rendered for Computes, built with g++ as one library, run on numpy arrays.

    `max_grid` caps the blocks launched (kernels walk their tiles grid-stride,
    so a smaller grid must give the same result, only slower on a GPU).
    """

    def __init__(self, kernels: Mapping[str, tuple[Compute, TileConfig]], folder: Path,
                 max_grid: int = 3) -> None:
        # tiles as the CUDA backend's tile step completes them, unless planned already
        self.kernels = {sym: (c, t if t.launch is not None else plan_cuda_tile(c, t)) for sym, (c, t) in kernels.items()}
        self.max_grid = max_grid
        (folder / "cuda_fp16.h").write_text(SHIM)
        parts = []
        for sym, (c, tile) in self.kernels.items():
            parts.append(render_kernel(c, tile, sym))
            args = [f"({storage_ctype(c.dtype)}*)args[0]"]
            args += [f"(const {storage_ctype(t.dtype)}*)args[{i + 1}]"
                     for i, t in enumerate(c.inputs)]
            parts.append(_LAUNCHER.format(sym=sym, args=", ".join(args)))
        (folder / "kernels.cpp").write_text("\n".join(parts))
        lib = folder / "kernels.so"
        subprocess.run(["g++", "-std=c++20", "-O0", "-fwrapv", "-shared", "-fPIC", "-pthread",
                        "-w", "-I", str(folder), "-o", str(lib), str(folder / "kernels.cpp")],
                       check=True, capture_output=True, timeout=600)
        self.lib = ctypes.CDLL(str(lib))

    def run(self, symbol: str, inputs: Sequence[np.ndarray]) -> np.ndarray:
        """Launch kernel `symbol` on `inputs`; returns the freshly allocated output."""
        c, tile = self.kernels[symbol]
        arrays = [np.ascontiguousarray(x, dtype=dtype(t.dtype).np_type)
                  for x, t in zip(inputs, c.inputs, strict=True)]
        out = np.empty(c.shape, dtype(c.dtype).np_type)
        out.reshape(-1).view(np.uint8).fill(0xA5)  # garbage: an element the kernel skips shows
        launch = planned_launch(tile)
        self.launch(symbol, launch.grid[0], launch.block[0], [out.ctypes.data, *(a.ctypes.data for a in arrays)])
        return out

    def launch(self, symbol: str, grid: int, block: int, pointers: Sequence[int]) -> None:
        """Launch kernel `symbol` on raw (host) pointers, output first."""
        fn = getattr(self.lib, f"launch_{symbol}")
        fn.restype = None
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        fn(min(grid, self.max_grid), block, (ctypes.c_void_p * len(pointers))(*pointers))
