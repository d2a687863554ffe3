"""The tileforge client: compile ONNX models on a tileforge server from Python.

    import tileforge
    client = tileforge.Client()            # TILEFORGE_URL / TILEFORGE_TOKEN, or `tileforge login`
    job = client.compile(client.upload("model.onnx"), "cpu")
    job.wait(on_progress=lambda j: print(j.stage, j.progress))
    job.download("out/")
    profile = client.profile(job, runs=50).result()   # latency, memory, per-kernel roofline
    outputs = client.infer(job, {"x": x})              # run it on a worker: {name: ndarray}

It needs httpx and numpy and nothing of the compiler (`pip install tileforge[client]`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tileforge.client import Client
    from tileforge.errors import (
        AuthError,
        BadRequest,
        ChecksumMismatch,
        ClientError,
        Conflict,
        JobError,
        NotFound,
        ServerError,
        TooLarge,
        TooManyRequests,
        Unreachable,
        WaitTimeout,
    )
    from tileforge.job import Job
    from tileforge.model import Model
    from tileforge.runs import InferenceJob, ProfileJob

# Each name is imported from its module when first asked for (PEP 562): the `tileforge` command
# line imports this package for its parser, and httpx and the client took 0.12 s of its start.
_HOMES = {"Client": "tileforge.client", "Job": "tileforge.job", "Model": "tileforge.model",
          "InferenceJob": "tileforge.runs", "ProfileJob": "tileforge.runs",
          **dict.fromkeys(["AuthError", "BadRequest", "ChecksumMismatch", "ClientError", "Conflict", "JobError",
                           "NotFound", "ServerError", "TooLarge", "TooManyRequests", "Unreachable", "WaitTimeout"],
                          "tileforge.errors")}

__all__ = ["AuthError", "BadRequest", "ChecksumMismatch", "Client", "ClientError", "Conflict", "InferenceJob", "Job",
           "JobError", "Model", "NotFound", "ProfileJob", "ServerError", "TooLarge", "TooManyRequests", "Unreachable", "WaitTimeout"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'tileforge' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
