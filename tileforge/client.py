"""`tileforge.Client`: the service's API as Python calls."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import httpx
import numpy as np

from tileforge.config import resolve
from tileforge.errors import ClientError
from tileforge.job import Job
from tileforge.model import Model
from tileforge.runs import InferenceJob, ProfileJob, npz_bytes
from tileforge.transport import Transport, new_idempotency_key


class Client:
    """A connection to one tileforge server. `url` and `token` default to TILEFORGE_URL and
    TILEFORGE_TOKEN, then to the login `tileforge login URL` saved."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 60.0,
                 retries: int = 4, transport: httpx.BaseTransport | None = None) -> None:
        credentials = resolve(url, token)
        self.url = credentials.url
        self._t = Transport(credentials.url, credentials.token, timeout=timeout, retries=retries,
                            transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._t.close()

    def targets(self) -> list[dict[str, Any]]:
        """Every target a compilation may name, with its memory levels and fingerprint."""
        return self._t.request("GET", "/v1/targets").json()

    def upload(self, model: str | os.PathLike[str] | bytes, filename: str | None = None) -> Model:
        """Upload an ONNX model (a path, or its bytes); the same bytes give the same model."""
        if isinstance(model, bytes):
            data, name = model, filename or "model.onnx"
        else:
            path = Path(model)
            try:
                data = path.read_bytes()
            except OSError as e:
                raise ClientError(f"cannot read {path}: {e.strerror or e}") from None
            name = filename or path.name
        response = self._t.request("POST", "/v1/models", files=lambda: {"file": (name, data)})
        return Model.from_json(response.json())

    def model(self, model_id: str) -> Model:
        """One of this tenant's models."""
        return Model.from_json(self._t.request("GET", f"/v1/models/{model_id}").json())

    @overload
    def compile(self, model: Model | str, target: str = "cpu", *,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                options: Mapping[str, Any] | None = None, idempotency_key: str | None = None) -> Job: ...

    @overload
    def compile(self, model: Model | str, target: Sequence[str], *,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                options: Mapping[str, Any] | None = None, idempotency_key: str | None = None) -> list[Job]: ...

    def compile(self, model: Model | str, target: str | Sequence[str] = "cpu", *,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                options: Mapping[str, Any] | None = None,
                idempotency_key: str | None = None) -> Job | list[Job]:
        """Queue a compilation of `model` (a Model or its id) for a target, or one per target
        of a list (then a list of jobs, in order). `input_shapes` binds symbolic input dims;
        `options` are compile options. A retry after a lost answer sends the same
        idempotency key (one is made per call unless given), so it never submits twice."""
        body: dict[str, Any] = {"model_id": model.id if isinstance(model, Model) else model,
                                "options": dict(options or {})}
        if input_shapes:
            body["options"]["input_shapes"] = {name: [int(d) for d in dims] for name, dims in input_shapes.items()}
        if isinstance(target, str):
            body["target"] = target
        else:
            body["targets"] = list(target)
        data = self._t.request("POST", "/v1/compilations", json=body,
                               idempotency_key=idempotency_key or new_idempotency_key()).json()
        return Job(self._t, data) if isinstance(target, str) else [Job(self._t, d) for d in data]

    def job(self, job_id: str) -> Job:
        """One of this tenant's compilations."""
        return Job(self._t, self._t.request("GET", f"/v1/compilations/{job_id}").json())

    def jobs(self, status: str | None = None, model: Model | str | None = None, limit: int = 50) -> list[Job]:
        """This tenant's compilations, newest first, optionally by status or model."""
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        if model is not None:
            params["model_id"] = model.id if isinstance(model, Model) else model
        page = self._t.request("GET", "/v1/compilations", params=params).json()
        return [Job(self._t, item) for item in page["items"]]

    def kernels(self, target: str | None = None, op: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Cached kernels, most recently used first: `target` a target name or fingerprint
        prefix, `op` a substring of the op pattern."""
        params = {k: v for k, v in {"target": target, "op": op, "limit": limit}.items() if v is not None}
        return self._t.request("GET", "/v1/kernels", params=params).json()["items"]

    def profile(self, artifact_or_job: Job | str, runs: int = 50, threads: int | None = None) -> ProfileJob:
        """Queue a profile of an artifact (a succeeded Job, or an artifact id) on a worker of its
        target: `runs` timed runs after a warm-up, with `threads` CPU threads. Its `result()`
        holds the first-load time, median and p90 latency, peak memory and per-kernel roofline."""
        body = {"artifact_id": _artifact_id(artifact_or_job), "runs": runs, "threads": threads}
        return ProfileJob(self._t, self._t.request("POST", "/v1/profiles", json=body,
                                                   idempotency_key=new_idempotency_key()).json())

    def submit_inference(self, artifact_or_job: Job | str, inputs: Mapping[str, np.ndarray]) -> InferenceJob:
        """Queue a run of an artifact (a succeeded Job, or an artifact id) on `inputs` (by name)."""
        data, artifact_id = npz_bytes(inputs), _artifact_id(artifact_or_job)
        response = self._t.request("POST", "/v1/inferences", data={"artifact_id": artifact_id},
                                   idempotency_key=new_idempotency_key(),
                                   files=lambda: {"inputs": ("inputs.npz", data, "application/octet-stream")})
        return InferenceJob(self._t, response.json())

    def infer(self, artifact_or_job: Job | str, inputs: Mapping[str, np.ndarray],
              timeout: float | None = None) -> dict[str, np.ndarray]:
        """Run an artifact on a worker of its target on `inputs` and return its outputs by name."""
        return self.submit_inference(artifact_or_job, inputs).outputs(timeout)


def _artifact_id(artifact_or_job: Job | str) -> str:
    """The artifact id of a compile job (which must have one) or the id given."""
    if isinstance(artifact_or_job, str):
        return artifact_or_job
    return artifact_or_job.require_artifact()
