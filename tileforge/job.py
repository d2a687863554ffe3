"""A compile job on the server: its status, waiting for it (server-sent events, polling
when those fail), cancelling it, and fetching its artifact and report."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import httpx

from tileforge.errors import (
    ChecksumMismatch,
    ClientError,
    Conflict,
    JobError,
    Unreachable,
    WaitTimeout,
)
from tileforge.sse import iter_events
from tileforge.transport import Transport

TERMINAL = ("succeeded", "failed", "cancelled")
SHA256_HEADER = "X-Artifact-SHA256"
# The server sends a keep-alive every 15 s: a stream silent for longer is broken.
EVENTS_READ_TIMEOUT = 40.0


class RemoteJob:
    """A job on the server of any kind; `data` is its latest JSON as seen by this object.
    Subclasses say where it lives (`PATH`) and whether it has an events stream."""

    PATH = "/v1/compilations"
    HAS_EVENTS = True

    def __init__(self, transport: Transport, data: dict[str, Any]) -> None:
        self._t, self.data = transport, data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, target={self.target!r}, status={self.data['status']!r})"

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def target(self) -> str:
        return self.data["target"]

    @property
    def model_id(self) -> str:
        return self.data["model_id"]

    @property
    def status(self) -> str:
        """queued, running, succeeded, failed or cancelled; asked of the server until final."""
        if not self.finished:
            self.refresh()
        return self.data["status"]

    @property
    def finished(self) -> bool:
        """Whether the job had ended when last seen."""
        return self.data["status"] in TERMINAL

    @property
    def stage(self) -> str | None:
        return self.data.get("stage")

    @property
    def progress(self) -> float:
        return self.data.get("progress", 0.0)

    @property
    def error(self) -> str | None:
        return self.data.get("error")

    @property
    def artifact_id(self) -> str | None:
        return self.data.get("artifact_id")

    @property
    def validated(self) -> bool | None:
        """Whether the artifact ran on its device and matched onnxruntime (None until the
        job has succeeded; False with `validation_note` when it could not be run)."""
        return self.data.get("validated")

    @property
    def validation_note(self) -> str | None:
        """Why a succeeded job's artifact was not validated."""
        return self.data.get("validation_note")

    @property
    def validation_warning(self) -> str | None:
        """What a passing validation checked little of (onnxruntime's outputs held no normal
        number on the random inputs), else None."""
        return self.data.get("validation_warning")

    def refresh(self) -> Self:
        """Read the job's state from the server."""
        self.data = self._t.request("GET", f"{self.PATH}/{self.id}").json()
        return self

    def wait(self, timeout: float | None = None, on_progress: Callable[[Self], None] | None = None,
             poll_interval: float = 0.5) -> Self:
        """Block until the job ends (WaitTimeout after `timeout` seconds), calling
        `on_progress(job)` each time its status, stage or progress changes. Follows the
        server-sent events; polls instead when the stream cannot be had or breaks."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.finished and self.HAS_EVENTS:
            with contextlib.suppress(Unreachable, httpx.HTTPError, ValueError):
                self._follow_events(deadline, on_progress)
        while not self.finished:
            self._changed(self._t.request("GET", f"{self.PATH}/{self.id}").json(), on_progress)
            if self.finished:
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeout(f"job {self.id} is still {self.data['status']} after {timeout:g} s")
            time.sleep(poll_interval if left is None else min(poll_interval, left))
        return self

    def _follow_events(self, deadline: float | None, on_progress: Callable[[Self], None] | None) -> None:
        left = EVENTS_READ_TIMEOUT if deadline is None else deadline - time.monotonic()
        timeout = httpx.Timeout(10.0, read=max(0.1, min(EVENTS_READ_TIMEOUT, left)))
        with self._t.stream("GET", f"{self.PATH}/{self.id}/events", timeout=timeout) as r:
            if not r.headers.get("content-type", "").startswith("text/event-stream"):
                return
            for event, data in iter_events(r.iter_lines()):
                if event == "status":
                    self._changed(json.loads(data), on_progress)
                if self.finished or event == "end" or (deadline is not None and time.monotonic() > deadline):
                    return

    def _changed(self, data: dict[str, Any], on_progress: Callable[[Self], None] | None) -> None:
        if data != self.data:
            self.data = data
            if on_progress is not None:
                on_progress(self)

    def _require_success(self) -> None:
        """Wait-free check that the job succeeded (JobError naming its state otherwise)."""
        if self.status != "succeeded":
            reason = f": {self.error}" if self.error else ""
            raise JobError(f"{type(self).__name__} {self.id} has no result: it is {self.data['status']}{reason}")


class Job(RemoteJob):
    """One compilation; `data` is the server's latest `CompilationOut` as seen by this object."""

    def cancel(self) -> Job:
        """Cancel the job: at once if queued, at its next stage if running (Conflict once
        it has ended; a retried cancel that had already worked reads as done)."""
        try:
            self.data = self._t.request("POST", f"/v1/compilations/{self.id}/cancel").json()
        except Conflict:
            if self.refresh().data["status"] != "cancelled":
                raise
        return self

    def require_artifact(self) -> str:
        """The job's artifact id (JobError when it has none: it failed, was cancelled, or runs)."""
        if self.artifact_id is None:
            self.refresh()
        if self.artifact_id is None:
            reason = f": {self.error}" if self.error else ""
            raise JobError(f"job {self.id} has no artifact: it is {self.data['status']}{reason}")
        return self.artifact_id

    def download(self, path: str | Path | None = None) -> Path:
        """Save the artifact (.tar.gz) to `path` (a file, or a folder; default the current
        one) and return where it is. Its sha256 must match what the server announced, or
        nothing is kept (ChecksumMismatch)."""
        artifact_id = self.require_artifact()
        where = Path.cwd() if path is None else Path(path)
        target = where / f"{artifact_id}.tar.gz" if where.is_dir() else where
        part = target.with_name(target.name + ".part")
        digest = hashlib.sha256()
        try:
            with self._t.stream("GET", f"/v1/artifacts/{artifact_id}") as r, part.open("wb") as f:
                announced = r.headers.get(SHA256_HEADER)
                for chunk in r.iter_bytes():
                    f.write(chunk)
                    digest.update(chunk)
        except httpx.HTTPError as e:
            part.unlink(missing_ok=True)
            raise Unreachable(f"download of artifact {artifact_id} broke off: {type(e).__name__}: {e}") from None
        except ClientError:
            part.unlink(missing_ok=True)
            raise
        expected = {announced, self.data.get("artifact_sha256")}
        if expected != {digest.hexdigest()}:
            part.unlink()
            raise ChecksumMismatch(f"artifact {artifact_id} has sha256 {digest.hexdigest()}, but the server "
                                   f"announced {announced}; nothing was saved")
        part.replace(target)
        return target

    def report(self) -> dict[str, Any]:
        """The artifact's report.json: per kernel config, times, cache hit or miss; validation."""
        return self._t.request("GET", f"/v1/artifacts/{self.require_artifact()}/report").json()
