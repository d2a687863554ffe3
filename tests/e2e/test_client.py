"""The client library and the remote CLI against a real uvicorn and a real `celery worker`,
on the embedded default (SQLite, SQLite broker) and on PostgreSQL + Redis (the `service`
fixture of tests/e2e/conftest.py)."""

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from service_kit import ROOT, UPLOAD_LIMIT, ServiceFlow

import tileforge
from tileforge.job import Job

pytestmark = pytest.mark.slow

STAGES = {"load", "lower", "partition", "schedule", "codegen", "build", "package", "validate"}


def test_upload_compile_wait_download_run(service, onnx_models, tmp_path):
    data = onnx_models.mlp(seed=71, tail="Tanh")
    with service.client() as client:
        assert "cpu" in {t["name"] for t in client.targets()}
        model = client.upload(data)
        assert model.sha256 == hashlib.sha256(data).hexdigest() and model.inputs[0]["name"] == "x"
        job = client.compile(model, "cpu")
        assert isinstance(job, Job) and job.model_id == model.id
        seen: list[tuple[str, str | None, float]] = []
        job.wait(timeout=120, on_progress=lambda j: seen.append((j.data["status"], j.stage, j.progress)))
        assert job.status == "succeeded", job.error
        assert seen[-1][0] == "succeeded" and [p for _, _, p in seen] == sorted(p for _, _, p in seen)
        path = job.download(tmp_path)
        assert path == tmp_path / f"{job.artifact_id}.tar.gz"
        ServiceFlow.assert_runs_like_onnxruntime(path, data)
        report = job.report()
        assert report["model_sha256"] == model.sha256 and report["cache_misses"] == len(report["kernels"]) > 0
        assert {k["key"] for k in client.kernels(target="cpu")} >= {k["key"] for k in report["kernels"]}
        assert [j.id for j in client.jobs(model=model)] == [job.id]


def test_each_refusal_is_its_own_exception_with_the_servers_message(service, onnx_models, tmp_path):
    with service.client() as client:
        model = client.upload(onnx_models.mlp(seed=72))
        with pytest.raises(tileforge.BadRequest, match="tpu9") as e:
            client.compile(model, "tpu9")
        assert e.value.status == 422
        with pytest.raises(tileforge.NotFound, match="compilation 'nope' not found") as e:
            client.job("nope")
        assert e.value.status == 404
        with pytest.raises(tileforge.TooLarge, match="upload limit") as e:
            client.upload(b"\0" * (UPLOAD_LIMIT + 1))
        assert e.value.status == 413
        failed = client.compile(model, "cpu", input_shapes={"no_such_input": [1, 2]}).wait(timeout=60)
        assert failed.status == "failed" and "no_such_input" in failed.error
        with pytest.raises(tileforge.Conflict, match="already failed") as e:
            failed.cancel()
        assert e.value.status == 409
        with pytest.raises(tileforge.JobError, match="no artifact: it is failed"):
            failed.download(tmp_path)
    with tileforge.Client(service.url, "tf_not-a-token") as stranger, pytest.raises(tileforge.AuthError) as e:
        stranger.jobs()
    assert e.value.status == 401 and e.value.message


class LoseFirstSubmissionAnswer(httpx.HTTPTransport):
    """The network drops the server's answer to the first submission (after the server acted on it)."""

    def __init__(self) -> None:
        super().__init__()
        self.submissions: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path == "/v1/compilations":
            self.submissions.append(request.headers.get("Idempotency-Key"))
            if len(self.submissions) == 1:
                response.read()
                response.close()
                raise httpx.ReadError("connection reset by peer", request=request)
        return response


def test_a_retried_submission_creates_one_job(service, onnx_models):
    network = LoseFirstSubmissionAnswer()
    with service.client(transport=network) as client:
        model = client.upload(onnx_models.mlp(seed=73))
        job = client.compile(model, "cuda:h100")  # no CUDA worker here: it stays queued
        assert len(network.submissions) == 2 and network.submissions[0] == network.submissions[1] is not None
        assert [j.id for j in client.jobs(model=model)] == [job.id]
        assert job.cancel().status == "cancelled"


def test_concurrent_submissions_with_one_key_make_one_job(service, onnx_models):
    from concurrent.futures import ThreadPoolExecutor

    with service.client() as client:
        model = client.upload(onnx_models.mlp(seed=76))
        with ThreadPoolExecutor(4) as pool:  # they race to the unique (tenant, key): one wins, all answer it
            jobs = list(pool.map(lambda _: client.compile(model, "cuda:h100", idempotency_key="race-1"), range(4)))
        assert len({j.id for j in jobs}) == 1 and [j.id for j in client.jobs(model=model)] == [jobs[0].id]
        jobs[0].cancel()


def test_several_targets_in_one_request_share_the_upload(service, onnx_models):
    with service.client() as client:
        model = client.upload(onnx_models.mlp(seed=74))
        cpu, gpu = client.compile(model, ["cpu", "cuda:h100"], options={"threads": 1})
        assert (cpu.target, gpu.target, cpu.model_id, gpu.model_id) == ("cpu", "cuda:h100", model.id, model.id)
        assert cpu.wait(timeout=120).status == "succeeded", cpu.error
        with pytest.raises(tileforge.WaitTimeout, match="still queued"):
            gpu.wait(timeout=1)
        assert gpu.cancel().status == "cancelled"
        assert sorted(j.id for j in client.jobs(model=model)) == sorted([cpu.id, gpu.id])


def _tileforge(args: list[str], env: dict[str, str], module: str = "server.cli") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)


def test_cli_login_submit_wait_jobs_download(service, onnx_models, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TILEFORGE_URL", "TILEFORGE_TOKEN")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    login = _tileforge(["login", service.url, "--token", service.token], env, "tileforge")
    assert login.returncode == 0, login.stderr
    assert stat.S_IMODE((tmp_path / "config" / "tileforge" / "config.json").stat().st_mode) == 0o600

    (tmp_path / "m.onnx").write_bytes(onnx_models.mlp(seed=75, hidden=24))
    run = _tileforge(["submit", str(tmp_path / "m.onnx"), "--target", "cpu", "--input-shape", "x=4,16",
                      "--wait", "-o", str(tmp_path / "out")], env)
    assert run.returncode == 0, run.stderr
    job_id = run.stdout.split()[1]
    progress = [line for line in run.stderr.splitlines() if line.startswith(job_id[:12])]
    assert any("running" in line and line.split()[-1] in STAGES for line in progress), run.stderr
    assert progress[-1].endswith("100%  succeeded"), run.stderr
    artifact = Path(run.stdout.split(" -> ")[1].strip())
    assert artifact.parent == tmp_path / "out" and artifact.is_file()

    listed = _tileforge(["jobs"], env, "tileforge")
    assert listed.returncode == 0 and job_id[:12] in listed.stdout and "succeeded" in listed.stdout
    again = _tileforge(["download", job_id, "-o", str(tmp_path / "again")], env, "tileforge")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / artifact.name).read_bytes() == artifact.read_bytes()

    missing = _tileforge(["job", "nope"], env, "tileforge")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr == "error: compilation 'nope' not found (HTTP 404)\n"
