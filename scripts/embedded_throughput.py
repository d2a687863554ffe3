"""How fast the embedded default (SQLite database, SQLite broker) clears small jobs.

Starts `tileforge serve --with-worker` in a fresh home, uploads one small model, compiles it
once (so every later job is a kernel-cache hit), then submits N more compilations of it at
once and reports the seconds until all have ended. Run it with the broker polled every 1 s
(kombu's own default) and at the default setting to see what the polling interval costs:

    .venv/bin/python scripts/embedded_throughput.py --polling 1.0
    .venv/bin/python scripts/embedded_throughput.py
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import onnx
from live_service import TERMINAL, served
from onnx import TensorProto, helper, numpy_helper


def small_model(seed: int = 0) -> bytes:
    """x[4,16] -> MatMul(16x8) -> Relu: one small kernel (weights from `seed`: other bytes,
    the same kernel)."""
    w = numpy_helper.from_array(np.random.default_rng(seed).standard_normal((16, 8)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w])
    out = io.BytesIO()
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), out)
    return out.getvalue()


def wait_all(client: httpx.Client, job_ids: list[str], timeout: float) -> list[dict]:
    """Poll until every job has ended; their final states."""
    deadline, pending, done = time.monotonic() + timeout, list(job_ids), {}
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(pending)} jobs still open after {timeout} s")
        for job_id in list(pending):
            job = client.get(f"/v1/compilations/{job_id}").json()
            if job["status"] in TERMINAL:
                done[job_id] = job
                pending.remove(job_id)
        time.sleep(0.02)
    return [done[j] for j in job_ids]


def measure(jobs: int, polling: float | None, home: Path) -> float:
    """Seconds to clear `jobs` cache-hit compilations on a fresh embedded service."""
    env = {"TILEFORGE_HOME": str(home)}
    if polling is not None:
        env["TILEFORGE_BROKER_POLLING_SECONDS"] = str(polling)
    with served(env, home / "serve.log") as url:
        token = (home / "local-token").read_text().strip()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            model = client.post("/v1/models", files={"file": ("m.onnx", small_model())}).json()["id"]
            submit = {"model_id": model, "target": "cpu", "options": {}}
            wait_all(client, [client.post("/v1/compilations", json=submit).json()["id"]], 300)  # fills the cache
            start = time.monotonic()
            ids = [client.post("/v1/compilations", json=submit).json()["id"] for _ in range(jobs)]
            states = wait_all(client, ids, 600)
            elapsed = time.monotonic() - start
            assert all(s["status"] == "succeeded" for s in states), states
            return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=20)
    p.add_argument("--polling", type=float, default=None,
                   help="TILEFORGE_BROKER_POLLING_SECONDS (default: the setting's default)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as home:
        seconds = measure(a.jobs, a.polling, Path(home))
    label = "the default interval" if a.polling is None else f"every {a.polling} s"
    print(f"{a.jobs} cache-hit jobs on the embedded default (broker polled at {label}): "
          f"{seconds:.2f} s, {a.jobs / seconds:.1f} jobs/s")


if __name__ == "__main__":
    main()
