"""A job never runs twice at the same time: its task delivered a second time, to a second
live worker, while the first runs it, is refused by the claim (the job is running under a
live lease), and the job runs once, on PostgreSQL + Redis."""

import time

import pytest
from service_kit import ServiceFlow, make_token

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_a_task_delivered_twice_while_running_runs_once(pg_redis_settings, start_worker, onnx_models, tmp_path):
    from fastapi.testclient import TestClient

    from server.db.models import new_id
    from server.jobs.queue import JobQueue, create_celery
    from server.main import create_app

    workers = {name: start_worker(pg_redis_settings, name) for name in ("fence-a", "fence-b")}
    with TestClient(create_app(pg_redis_settings)) as client:
        flow = ServiceFlow(client, make_token(pg_redis_settings, "alice"))
        data = onnx_models.deep(batch=5)  # its own kernels: not cached by another test
        job = flow.submit(flow.upload(data)["id"])["id"]
        building = flow.wait(job, timeout=60, until=lambda j: j["stage"] == "build" or j["status"] in flow.TERMINAL)
        assert building["status"] == "running", building
        runner = building["worker"].split("@")[0]
        other = workers[({"fence-a", "fence-b"} - {runner}).pop()]

        # The same job's task once more, as a broker that redelivers (or a reaper that
        # republishes) would: the busy worker holds no spare message, so the idle one gets it.
        JobQueue(create_celery(pg_redis_settings), pg_redis_settings).enqueue(job, "cpu", new_id(), "compile")
        deadline = time.monotonic() + 30
        while f"job {job}: skipped" not in other.output():
            assert time.monotonic() < deadline, other.output()[-3000:]
            time.sleep(0.1)
        assert flow.job(job)["status"] == "running"  # refused while the first execution ran

        done = flow.wait(job, timeout=180)
        assert done["status"] == "succeeded", done["error"]
        assert done["attempts"] == 1 and done["worker"].split("@")[0] == runner  # one execution, the first
        assert f"job {job}: attempt" not in other.output()  # the second worker never started it
        flow.assert_runs_like_onnxruntime(flow.download(done, tmp_path), data)
