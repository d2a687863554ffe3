"""A worker SIGKILLed mid-job on PostgreSQL + Redis: its lease runs out, the reaper
re-queues the job, another worker finishes it, and no half-written artifact is served."""

import hashlib

import pytest
from service_kit import ServiceFlow, make_token

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_killed_worker_job_finishes_on_another(pg_redis_settings, start_worker, onnx_models, tmp_path):
    from fastapi.testclient import TestClient

    from server.main import create_app

    first = start_worker(pg_redis_settings, "doomed")
    with TestClient(create_app(pg_redis_settings)) as client:
        flow = ServiceFlow(client, make_token(pg_redis_settings, "alice"))
        data = onnx_models.deep(batch=6)  # its own kernels: not cached by another test
        job = flow.submit(flow.upload(data)["id"])
        building = flow.wait(job["id"], timeout=60,
                             until=lambda j: j["stage"] == "build" or j["status"] in flow.TERMINAL)
        assert (building["status"], building["stage"]) == ("running", "build"), building
        first.kill()  # mid-build: gcc is running, nothing stored yet
        stuck = flow.job(job["id"])
        assert (stuck["status"], stuck["artifact_id"]) == ("running", None)

        start_worker(pg_redis_settings, "rescuer")
        done = flow.wait(job["id"], timeout=180)
        assert done["status"] == "succeeded", done["error"]
        assert done["attempts"] == 2 and done["worker"].startswith("rescuer@")
        flow.assert_runs_like_onnxruntime(flow.download(done, tmp_path), data)

    storage = pg_redis_settings.storage_root
    for blob in storage.rglob("*"):
        if blob.is_file() and not blob.name.startswith(".incoming-"):
            assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name  # every served blob is whole
