"""Jobs that run an artifact on the server's workers: a profile (latency, memory, per-kernel
roofline) and an inference (the outputs of the user's own inputs)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np

from tileforge.errors import ClientError
from tileforge.job import RemoteJob


class ProfileJob(RemoteJob):
    """A profile job; `result()` waits for it and returns its measurements."""

    PATH = "/v1/profiles"
    HAS_EVENTS = False

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """The measurements once the profile has succeeded (JobError if it failed):
        `first_load_ms`, `median_us`, `p90_us`, `peak_memory_bytes`, `kernels_us`, and the
        roofline's `bounds` and `rows` (one per kernel: time, GFLOP/s, GB/s, bound)."""
        self.wait(timeout)
        self._require_success()
        return self.data["result"]


class InferenceJob(RemoteJob):
    """An inference job; `outputs()` waits for it and returns the model's outputs."""

    PATH = "/v1/inferences"
    HAS_EVENTS = False

    def outputs(self, timeout: float | None = None) -> dict[str, np.ndarray]:
        """The outputs by name once the inference has succeeded (JobError if it failed)."""
        self.wait(timeout)
        self._require_success()
        data = self._t.request("GET", f"{self.PATH}/{self.id}/outputs").content
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                return {name: archive[name] for name in archive.files}
        except (ValueError, OSError) as e:
            raise ClientError(f"the outputs of inference {self.id} are not a readable .npz: {e}") from None


def npz_bytes(inputs: Mapping[str, np.ndarray]) -> bytes:
    """`inputs` as an .npz archive (arrays by name, no pickled objects)."""
    out = io.BytesIO()
    np.savez(out, **{name: np.asarray(a) for name, a in inputs.items()})
    return out.getvalue()
