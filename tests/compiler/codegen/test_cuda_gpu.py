"""Every CUDA test case's kernel, built for this machine's GPU, matches the TE interpreter
(marked `gpu`: skips with the reason when no GPU, pycuda or nvcc is present)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_cases import ALL_CASES, check_close, tile_for
from cuda_device import device_arch

from compiler.build.nvcc import compile_cubin
from compiler.codegen.cuda.kernel import planned_launch, render_kernel
from compiler.ir.dtypes import dtype
from compiler.ir.interp import evaluate

ARCH, WHY_NOT = device_arch()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(ARCH is None, reason=WHY_NOT)]


def test_every_case_kernel_matches_the_interpreter_on_the_gpu() -> None:
    import pycuda.autoinit  # noqa: F401  (a context on device 0 for this test)
    import pycuda.driver as drv

    assert ARCH is not None
    cases = list(ALL_CASES.items())
    source = "\n".join(render_kernel(case[0], tile_for(case), f"k{n}") for n, (_, case) in enumerate(cases))
    module = drv.module_from_buffer(compile_cubin(source, ARCH))
    failures = []
    for n, (name, case) in enumerate(cases):
        c, _, make_inputs = case
        inputs = make_inputs()
        want = evaluate(c, inputs)
        dev_in = []
        for x, t in zip(inputs, c.inputs, strict=True):
            host = np.ascontiguousarray(x, dtype(t.dtype).np_type)
            dev_in.append(drv.mem_alloc(max(1, host.nbytes)))  # CUDA refuses empty allocations
            if host.nbytes:
                drv.memcpy_htod(dev_in[-1], host)
        dev_out = drv.mem_alloc(max(1, want.nbytes))
        launch = planned_launch(tile_for(case))
        grid, block = launch.grid, launch.block
        module.get_function(f"k{n}")(dev_out, *dev_in, grid=grid, block=block)
        got = np.empty_like(want)
        if got.nbytes:
            drv.memcpy_dtoh(got, dev_out)
        try:
            check_close(got, want, c)
        except AssertionError as e:
            failures.append(f"{name}: {e}")
    assert not failures, "\n".join(failures)
