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

__all__ = ["AuthError", "BadRequest", "ChecksumMismatch", "Client", "ClientError", "Conflict", "InferenceJob", "Job",
           "JobError", "Model", "NotFound", "ProfileJob", "ServerError", "TooLarge", "TooManyRequests", "Unreachable", "WaitTimeout"]
