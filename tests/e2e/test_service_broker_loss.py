"""A broker that restarts without keeping its messages loses no job: on the real PostgreSQL
and Redis, with a real `celery worker`, jobs whose messages vanished from Redis while they
were queued are published again by the reaper and run, each once."""

import pytest
from service_kit import ServiceFlow, make_token

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_jobs_whose_redis_messages_were_lost_still_run(pg_redis_settings, start_worker, onnx_models):
    import redis
    from fastapi.testclient import TestClient

    from server.main import create_app

    settings = pg_redis_settings.model_copy(update={"job_republish_seconds": 2.0})
    with TestClient(create_app(settings)) as client:
        flow = ServiceFlow(client, make_token(settings, "alice"))
        # shapes no other module compiles: the kernel cache in the shared database stays theirs
        jobs = [flow.submit(flow.upload(onnx_models.mlp(seed=40 + i, hidden=40 + i))["id"]) for i in range(3)]
        broker = redis.Redis.from_url(settings.redis_url)
        queue = settings.queue_for("cpu")
        assert broker.llen(queue) == 3  # no worker yet: the tasks wait in Redis
        broker.delete(queue)  # what a restart with nothing on disk leaves: no message at all
        start_worker(settings, "w-after-loss")
        done = [flow.wait(job["id"]) for job in jobs]
    assert [d["status"] for d in done] == ["succeeded"] * 3, [d["error"] for d in done]
    assert all(d["attempts"] == 1 for d in done)  # published again, run once
