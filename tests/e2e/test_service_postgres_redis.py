"""The whole service on the real PostgreSQL and Redis with a real `celery worker`
subprocess: upload -> compile -> poll and SSE -> download -> run, matching onnxruntime."""

import threading

import pytest
from service_kit import ServiceFlow, make_token

pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.fixture(scope="module")
def flow(pg_redis_settings, start_worker):
    from fastapi.testclient import TestClient

    from server.main import create_app

    start_worker(pg_redis_settings, "w1")
    with TestClient(create_app(pg_redis_settings)) as client:
        yield ServiceFlow(client, make_token(pg_redis_settings, "alice"))


def test_upload_compile_watch_download_run(flow, onnx_models, tmp_path):
    data = onnx_models.mlp(seed=11, hidden=44)  # shapes no other module compiles: its kernels are new
    model = flow.upload(data)
    job = flow.submit(model["id"], "cpu")
    assert job["status"] == "queued"
    streamed: list[dict] = []
    watcher = threading.Thread(target=lambda: streamed.extend(flow.events(job["id"])))
    watcher.start()
    done = flow.wait(job["id"])
    watcher.join(60)
    assert done["status"] == "succeeded", done["error"]
    assert done["progress"] == 1.0 and done["attempts"] == 1
    assert set(done["stage_seconds"]) >= {"load", "lower", "schedule", "build", "package"}
    assert done["cache_misses"] > 0 and done["cache_hits"] == 0
    assert done["validation"]["passed"] is True
    assert streamed[-1]["status"] == "succeeded" and streamed[-1]["artifact_id"] == done["artifact_id"]
    assert [e["progress"] for e in streamed] == sorted(e["progress"] for e in streamed)
    flow.assert_runs_like_onnxruntime(flow.download(done, tmp_path), data)
    listed = flow.client.get("/v1/compilations", params={"model_id": model["id"]}, headers=flow.headers).json()
    assert listed["items"] == [done]


def test_same_model_again_is_all_cache_hits(flow, onnx_models):
    model = flow.upload(onnx_models.mlp(seed=12))
    first = flow.wait(flow.submit(model["id"])["id"])
    second = flow.wait(flow.submit(model["id"])["id"])
    assert first["status"] == second["status"] == "succeeded", (first["error"], second["error"])
    assert second["cache_misses"] == 0 and second["cache_hits"] == first["cache_hits"] + first["cache_misses"]
    kernels = flow.client.get("/v1/kernels", params={"target": "cpu"}, headers=flow.headers).json()
    assert kernels["total"] >= first["cache_misses"]
    assert any(k["hit_count"] > 0 for k in kernels["items"])


def test_cancelled_job_never_runs(flow, onnx_models):
    model = flow.upload(onnx_models.mlp(seed=13))
    job = flow.submit(model["id"])
    r = flow.client.post(f"/v1/compilations/{job['id']}/cancel", headers=flow.headers)
    final = flow.wait(job["id"])
    if r.status_code == 409:  # the worker had already finished it: the answer says so
        assert final["status"] == "succeeded" and "already succeeded" in r.json()["detail"]
    elif r.json()["status"] == "cancelled":  # cancelled while queued: the worker must skip it
        assert final["status"] == "cancelled" and final["artifact_id"] is None
    else:  # the worker had it already: it stops at the next stage, or had just finished
        assert final["status"] in ("cancelled", "succeeded")


def test_cuda_jobs_wait_on_their_own_queue(flow, pg_redis_settings, onnx_models):
    import time

    import redis

    from compiler.target import get_target, list_targets

    gpu = next(n for n in list_targets() if get_target(n).kind == "cuda")
    job = flow.submit(flow.upload(onnx_models.mlp(seed=14))["id"], gpu)
    time.sleep(2)  # the CPU worker is idle and listening: it must not take this job
    assert flow.job(job["id"])["status"] == "queued"
    client = redis.Redis.from_url(pg_redis_settings.redis_url)
    assert client.llen(pg_redis_settings.queue_for("cuda")) == 1
    assert client.llen(pg_redis_settings.queue_for("cpu")) == 0
    client.close()
    assert flow.client.post(f"/v1/compilations/{job['id']}/cancel", headers=flow.headers).json()["status"] == "cancelled"


def test_artifacts_are_the_tenants_own_and_go_with_their_model(flow, pg_redis_settings, onnx_models):
    from service_kit import auth

    model = flow.upload(onnx_models.mlp(seed=15))
    done = flow.wait(flow.submit(model["id"])["id"])
    assert done["status"] == "succeeded", done["error"]
    artifact = f"/v1/artifacts/{done['artifact_id']}"
    mallory = auth(make_token(pg_redis_settings, "mallory"))
    for url in (artifact, artifact + "/report"):
        r = flow.client.get(url, headers=mallory)
        assert r.status_code == 404 and "not found" in r.json()["detail"]
    blob = pg_redis_settings.storage_root / done["artifact_sha256"][:2] / done["artifact_sha256"]
    assert blob.exists()
    assert flow.client.delete(f"/v1/models/{model['id']}", headers=flow.headers).status_code == 204
    assert flow.client.get(artifact, headers=flow.headers).status_code == 404
    assert not blob.exists()
