"""CUDA graphs through the driver API (ctypes on libcuda), which pycuda does not wrap.

A model's launch table never changes after loading (fixed arena, weights and I/O
pointers), so the runtime records it once by stream capture and replays the graph:
one `cuGraphLaunch` instead of a Python-driven launch per kernel, which for a model of
many small kernels is most of its latency. Capture follows CUDA's fork/join rule: every
stream that joins the capture waits on an event of the origin stream and is joined back
into it before the capture ends (the caller's launch function does both).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

_CAPTURE_MODE_RELAXED = 2  # the capturing thread may call APIs unsafe under capture elsewhere


class GraphError(RuntimeError):
    """The driver refused a graph call (the runtime then launches kernel by kernel)."""


def _driver() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuStreamBeginCapture_v2.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.cuStreamEndCapture.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.cuGraphInstantiateWithFlags.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                                ctypes.c_ulonglong]
    lib.cuGraphLaunch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.cuGraphExecDestroy.argtypes = [ctypes.c_void_p]
    lib.cuGraphDestroy.argtypes = [ctypes.c_void_p]
    return lib


def _check(result: int, call: str) -> None:
    if result != 0:
        raise GraphError(f"{call} failed with CUresult {result}")


class CudaGraph:
    """A recorded launch sequence, replayed on a stream (in the context current at capture)."""

    def __init__(self, stream_handle: int, record: Callable[[], Any]) -> None:
        """Capture what `record()` enqueues on stream `stream_handle` (and the streams it forks)."""
        self._lib = _driver()
        graph, exe = ctypes.c_void_p(), ctypes.c_void_p()
        _check(self._lib.cuStreamBeginCapture_v2(stream_handle, _CAPTURE_MODE_RELAXED),
               "cuStreamBeginCapture")
        try:
            record()
        finally:
            ended = self._lib.cuStreamEndCapture(stream_handle, ctypes.byref(graph))
        _check(ended, "cuStreamEndCapture")
        try:
            _check(self._lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, 0),
                   "cuGraphInstantiateWithFlags")
        finally:
            self._lib.cuGraphDestroy(graph)
        self._exec: ctypes.c_void_p | None = exe

    def launch(self, stream_handle: int) -> None:
        """Enqueue one replay of the graph on the stream."""
        if self._exec is None:
            raise GraphError("the graph was released")
        _check(self._lib.cuGraphLaunch(self._exec, stream_handle), "cuGraphLaunch")

    def release(self) -> None:
        """Free the instantiated graph (its context must be current)."""
        if self._exec is not None:
            self._lib.cuGraphExecDestroy(self._exec)
            self._exec = None
