"""Times CUDA kernel candidates on this machine's GPU (Roller's top-k measurement, on the
device that will run them): the candidates of one kernel, built into one cubin, each
launched on the same random buffers between CUDA events; the median per launch is its
measured time. A kernel far below the launch rate times as the launch rate: candidates
that fast are equal for this purpose.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from compiler.ir.dtypes import dtype
from compiler.ir.te import Compute
from compiler.runtime.cuda import cuda_driver

Launch = tuple[str, tuple[int, int, int], tuple[int, int, int]]  # symbol, grid, block

_TRIALS = 5
_LAUNCHES_PER_TRIAL = 10


def time_cuda_kernels(cubin: bytes, launches: Sequence[Launch], compute: Compute,
                      device: int = 0) -> dict[str, float]:
    """Median microseconds per launch of each (symbol, grid, block) in `cubin`, every one
    computing `compute`: output first, then the inputs (random floats; integer inputs 0,
    which is in range wherever they index)."""
    drv = cuda_driver()
    context = drv.Device(device).retain_primary_context()
    context.push()
    try:
        module = drv.module_from_buffer(cubin)
        rng = np.random.default_rng(0)
        memory = []
        for t in (compute, *compute.inputs):
            host = np.zeros(t.shape, dtype(t.dtype).np_type)
            if dtype(t.dtype).is_float:
                host[...] = rng.standard_normal(t.shape)
            memory.append(drv.mem_alloc(max(1, host.nbytes)))
            if host.nbytes:
                drv.memcpy_htod(memory[-1], host)
        args = [np.uintp(int(m)) for m in memory]
        start, end = drv.Event(), drv.Event()
        result: dict[str, float] = {}
        for symbol, grid, block in launches:
            fn = module.get_function(symbol)
            fn.prepare("P" * len(args))
            fn.prepared_call(grid, block, *args)  # warm-up: module load, first-touch
            trials = []
            for _ in range(_TRIALS):
                start.record()
                for _ in range(_LAUNCHES_PER_TRIAL):
                    fn.prepared_async_call(grid, block, None, *args)
                end.record()
                end.synchronize()
                trials.append(end.time_since(start) * 1e3 / _LAUNCHES_PER_TRIAL)
            result[symbol] = statistics.median(trials)
        return result
    finally:
        context.pop()
