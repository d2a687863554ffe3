"""The real PostgreSQL and Redis restarted under running jobs, with the machine's own service
commands: the API and the worker reconnect by themselves and every job still succeeds
(finished, or retried), none lost.

These restart the machine's shared servers: every other client of them sees its
connections dropped. They skip where the service commands are not there to run.
"""

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from service_kit import ServiceFlow, make_token, reachable

pytestmark = [pytest.mark.services, pytest.mark.slow]

REDIS_START = ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379",
               "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log"]


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr or done.stdout}"


def _until_reachable(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not reachable("127.0.0.1", port):
        assert time.monotonic() < deadline, f"nothing listens on port {port} after the restart"
        time.sleep(0.1)


def restart_postgres() -> None:
    """The machine's cluster stopped (fast shutdown: clients are cut off), left down a few
    seconds, and started again with `pg_ctlcluster`."""
    versions = sorted(p.name for p in Path("/etc/postgresql").glob("*")) if Path("/etc/postgresql").is_dir() else []
    if not versions or not shutil.which("pg_ctlcluster"):
        pytest.skip("no pg_ctlcluster cluster to restart on this machine")
    cluster = ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main"]
    _run([*cluster, "stop", "-m", "fast"])
    try:
        # An outage, not a blink: every queued job's task meets it and must wait it out
        # (worker/transient.py). With fully random retry delays, 6 s failed this test in 2
        # runs of 2: a task spent its 3 retries in milliseconds and gave its job up.
        time.sleep(6.0)
    finally:
        _run([*cluster, "start"])
    _until_reachable(5432)


def restart_redis() -> None:
    """Redis shut down without saving and started again: it comes back empty."""
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        pytest.skip("no redis-server / redis-cli to restart Redis with")
    _run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "shutdown", "nosave"])
    time.sleep(1.0)  # an outage, not a blink
    _run(REDIS_START)
    _until_reachable(6379)


def _wait_all(flow: ServiceFlow, job_ids: list[str], timeout: float = 150) -> dict[str, dict]:
    """Each job once it ends, polling through the outage (answers other than 200 are retried)."""
    done: dict[str, dict] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(job_ids):
        assert time.monotonic() < deadline, f"jobs not finished after {timeout}s: {set(job_ids) - set(done)}"
        for job_id in set(job_ids) - set(done):
            r = flow.client.get(f"/v1/compilations/{job_id}", headers=flow.headers)
            if r.status_code == 200 and r.json()["status"] in flow.TERMINAL:
                done[job_id] = r.json()
        time.sleep(0.2)
    return done


def _until_one_runs(flow: ServiceFlow, job_ids: list[str], timeout: float = 60) -> None:
    """Poll until one of the jobs is seen running. A small compile can start and end between
    two polls of the first job (a loaded host, warm caches): the next one is then caught."""
    deadline = time.monotonic() + timeout
    while True:
        statuses = [flow.job(job_id)["status"] for job_id in job_ids]
        if "running" in statuses:
            return
        assert time.monotonic() < deadline and "queued" in statuses, f"no job seen running: {statuses}"
        time.sleep(0.02)


def _restart_under_jobs(settings, start_worker, onnx_models, restart, first_seed: int) -> None:
    """Four jobs (shapes no other test compiles, so none is a cache hit) on one worker:
    restart a server while one runs, then every job must succeed."""
    from fastapi.testclient import TestClient

    from server.main import create_app

    start_worker(settings, f"w-restart-{first_seed}")
    # Server errors as answers, not exceptions: during the outage the API may answer 5xx.
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        flow = ServiceFlow(client, make_token(settings, "alice"))
        ids = [flow.submit(flow.upload(onnx_models.mlp(seed=first_seed + i, hidden=first_seed + i))["id"])["id"]
               for i in range(4)]
        _until_one_runs(flow, ids)
        restart()
        done = _wait_all(flow, ids)
        assert client.get("/v1/models", headers=flow.headers).status_code == 200  # the API reconnected
    statuses = {job_id: (d["status"], d["error"]) for job_id, d in done.items()}
    assert all(d["status"] == "succeeded" for d in done.values()), statuses
    assert all(d["artifact_id"] for d in done.values())


def test_postgres_restarted_while_jobs_run(pg_redis_settings, start_worker, onnx_models):
    _restart_under_jobs(pg_redis_settings, start_worker, onnx_models, restart_postgres, first_seed=71)


def test_redis_restarted_empty_while_jobs_run(pg_redis_settings, start_worker, onnx_models):
    # a message Redis forgot is published again after this long (the worker's reaper too)
    settings = pg_redis_settings.model_copy(update={"job_republish_seconds": 3.0})
    _restart_under_jobs(settings, start_worker, onnx_models, restart_redis, first_seed=81)
