"""schemathesis against the live API (a real uvicorn on the embedded default, a valid
token): every check it has (`--checks all`), a fixed seed and a bounded number of examples
per operation, so the run is the same each time and stays well under a minute. It passes
only with no server error, no response outside its schema and no undocumented status.
Per-operation expectations, and the ids of real objects the test makes first (so operations
on a model, a job, an artifact or a kernel reach their logic rather than a 404), live in
schemathesis.toml beside this file."""

import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from service_kit import ROOT, auth, make_token, migrated, run_job_in_process

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED, MAX_EXAMPLES = 18, 10


def test_schemathesis_finds_nothing(module_tmp, start_server, onnx_models, tmp_path):
    from server.core.config import Settings

    # The run sends a few thousand requests: the rate limit is not what is under test here.
    settings = Settings(home=module_tmp / "home", tenant_requests_per_minute=1_000_000)
    migrated(settings.db_url)
    url = start_server(settings)
    token = make_token(settings, "alice")
    with httpx.Client(base_url=url, headers=auth(token), timeout=60) as client:
        objects = _real_objects(client, settings, onnx_models)
    r = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "--no-color",
         "run", f"{url}/openapi.json", "--checks", "all", "--seed", str(SEED),
         "--max-examples", str(MAX_EXAMPLES), "--header", f"Authorization: Bearer {token}",
         "--report", "junit", "--report-junit-path", str(tmp_path / "schemathesis.xml")],
        cwd=ROOT, env=os.environ | objects, capture_output=True, text=True,
        timeout=240)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "Tested: " in r.stdout and " failures" not in r.stdout, r.stdout[-6000:]


def _real_objects(client: httpx.Client, settings, onnx_models) -> dict[str, str]:
    """A model, a compile job that succeeded with its artifact and kernels, a profile and an
    inference of that artifact (jobs run in this process by the real pipeline), and a spare
    model for DELETE to remove; their ids as the variables schemathesis.toml reads."""
    import io

    model = client.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp())}).json()["id"]
    spare = client.post("/v1/models", files={"file": ("s.onnx", onnx_models.mlp(seed=1))}).json()["id"]
    job = client.post("/v1/compilations", json={"model_id": model, "target": "cpu"}).json()["id"]
    assert run_job_in_process(settings, job) == "succeeded"
    artifact = client.get(f"/v1/compilations/{job}").json()["artifact_id"]
    profile = client.post("/v1/profiles", json={"artifact_id": artifact, "runs": 3}).json()["id"]
    inputs = io.BytesIO()
    np.savez(inputs, x=np.ones((4, 16), np.float32))
    inference = client.post("/v1/inferences", data={"artifact_id": artifact},
                            files={"inputs": ("in.npz", inputs.getvalue())}).json()["id"]
    assert run_job_in_process(settings, profile) == run_job_in_process(settings, inference) == "succeeded"
    kernel = client.get("/v1/kernels").json()["items"][0]["key"]
    return {"TILEFORGE_FUZZ_MODEL_ID": model, "TILEFORGE_FUZZ_SPARE_MODEL_ID": spare,
            "TILEFORGE_FUZZ_JOB_ID": job, "TILEFORGE_FUZZ_ARTIFACT_ID": artifact,
            "TILEFORGE_FUZZ_PROFILE_ID": profile, "TILEFORGE_FUZZ_INFERENCE_ID": inference,
            "TILEFORGE_FUZZ_KERNEL_KEY": kernel}
