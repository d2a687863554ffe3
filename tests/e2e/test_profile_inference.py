"""Profile and inference jobs end to end, through the client library, against a real uvicorn
and a real `celery worker` (the `service` fixture: embedded default, PostgreSQL + Redis)."""


import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from service_kit import INFERENCE_LIMIT, ROOT

import tileforge

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(service, onnx_models):
    """A compiled MLP (x[4,16] -> y[4,8]) of this module's service: (its bytes, the job's id)."""
    data = onnx_models.mlp(seed=81)
    with service.client() as client:
        job = client.compile(client.upload(data), "cpu", options={"threads": 1}).wait(timeout=120)
    assert job.status == "succeeded", job.error
    return data, job.id


def test_a_profile_times_the_model_and_each_kernel(service, built):
    _, job_id = built
    with service.client() as client:
        job = client.job(job_id)
        profile = client.profile(job, runs=20, threads=1)
        assert isinstance(profile, tileforge.ProfileJob) and profile.data["artifact_id"] == job.artifact_id
        result = profile.result(timeout=120)
        assert profile.status == "succeeded" and profile.target == "cpu"
        assert result["runs"] == 20 and result["threads"] == 1
        assert result["first_load_ms"] > 0 and 0 < result["median_us"] <= result["p90_us"]
        assert result["peak_memory_bytes"] >= 0
        report = job.report()
        assert len(result["rows"]) == len(report["kernels"]) > 0
        assert {r["symbol"] for r in result["rows"]} == {k["symbol"] for k in report["kernels"]}
        assert all(r["measured_us"] > 0 and r["flops"] > 0 and r["gflops"] > 0 for r in result["rows"])
        rounding = 0.0005 * (len(result["rows"]) + 1)  # every figure is rounded to 3 decimals
        assert result["kernels_us"] == pytest.approx(sum(r["measured_us"] for r in result["rows"]), abs=rounding)
        assert client.profile(job.artifact_id, runs=1).result(timeout=120)["runs"] == 1


def test_an_inference_returns_what_onnxruntime_computes(service, built):
    data, job_id = built
    x = np.random.default_rng(5).standard_normal((4, 16)).astype(np.float32)
    (want,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    with service.client() as client:
        job = client.job(job_id)
        outputs = client.infer(job, {"x": x}, timeout=120)
        assert set(outputs) == {"y"} and outputs["y"].dtype == np.float32
        np.testing.assert_allclose(outputs["y"], want, rtol=1e-4, atol=1e-4)
        again = client.submit_inference(job.artifact_id, {"x": x})
        assert isinstance(again, tileforge.InferenceJob)
        np.testing.assert_array_equal(again.outputs(timeout=120)["y"], outputs["y"])
        assert again.data["outputs_url"] == f"/v1/inferences/{again.id}/outputs"


def test_each_refusal_of_a_run_is_its_own_exception(service, built):
    x = np.zeros((4, 16), np.float32)
    with service.client() as client:
        job = client.job(built[1])
        with pytest.raises(tileforge.NotFound, match="artifact 'nope' not found") as e:
            client.profile("nope")
        assert e.value.status == 404
        with pytest.raises(tileforge.NotFound, match="profile 'nope' not found"):
            tileforge.ProfileJob(client._t, {"id": "nope", "status": "queued"}).refresh()
        with pytest.raises(tileforge.BadRequest, match="runs") as e:
            client.profile(job, runs=0)
        assert e.value.status == 422
        with pytest.raises(tileforge.BadRequest, match=r"input 'x' has shape \[4, 15\], but the artifact takes "
                                                       r"\[4, 16\]") as e:
            client.infer(job, {"x": np.zeros((4, 15), np.float32)})
        assert e.value.status == 422
        with pytest.raises(tileforge.BadRequest, match="input 'x' has dtype float64"):
            client.infer(job, {"x": x.astype(np.float64)})
        with pytest.raises(tileforge.BadRequest, match=r"inputs lack 'x'"):
            client.infer(job, {"z": x})
        with pytest.raises(tileforge.BadRequest, match="Python objects"):
            client.infer(job, {"x": np.array([{"a": 1}], dtype=object)})
        with pytest.raises(tileforge.TooLarge, match="TILEFORGE_MAX_INFERENCE_BYTES") as e:
            client.infer(job, {"x": np.zeros(INFERENCE_LIMIT, np.float32)})
        assert e.value.status == 413


def _tileforge(service, *args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"TILEFORGE_URL": service.url, "TILEFORGE_TOKEN": service.token}
    return subprocess.run([sys.executable, "-m", "tileforge", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)


def test_cli_submit_profile_and_infer(service, built, tmp_path):
    data, job_id = built
    with service.client() as client:
        artifact_id = client.job(job_id).artifact_id
    run = _tileforge(service, "submit-profile", artifact_id, "--runs", "5", "--threads", "1")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("submitted profile ") and "over 5 runs" in run.stdout
    table = lines[next(i for i, x in enumerate(lines) if "time us" in x) + 1:]
    assert table and all(float(row.split()[-5]) > 0 for row in table), run.stdout

    x = np.random.default_rng(6).standard_normal((4, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    run = _tileforge(service, "infer", artifact_id, str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz"))
    assert run.returncode == 0, run.stderr
    (want,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out["y"], want, rtol=1e-4, atol=1e-4)

    missing = _tileforge(service, "submit-profile", "nope")
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == "error: artifact 'nope' not found (HTTP 404)\n"
