"""Whether this machine can run generated CUDA kernels: a GPU, pycuda and nvcc."""

from __future__ import annotations

from compiler.target.toolchain import find_tool


def device_arch() -> tuple[str | None, str]:
    """(sm_XY of device 0, "") when a GPU, pycuda and nvcc are usable, else (None, why not)."""
    try:
        import pycuda.driver as drv
    except ImportError:
        return None, "no GPU/pycuda: pycuda is not installed (docs/CUDA.md)"
    try:
        drv.init()
        if drv.Device.count() == 0:
            return None, "no GPU/pycuda: the CUDA driver finds no GPU"
        major, minor = drv.Device(0).compute_capability()
    except drv.Error as e:
        return None, f"no GPU/pycuda: {e}"
    if find_tool("nvcc") is None:
        return None, "no nvcc to build the kernels"
    return f"sm_{major}{minor}", ""
