"""A real worker's log lines in JSON (TILEFORGE_LOG_FORMAT=json): every line written while it
runs a job carries the job's id and its tenant."""

import json
import time

import pytest
from service_kit import FAST_JOB_SETTINGS, ServiceFlow, make_token, migrated

pytestmark = pytest.mark.slow


def test_a_worker_job_logs_its_id_and_tenant_in_json(module_tmp, start_worker, onnx_models):
    from fastapi.testclient import TestClient

    from server.core.config import Settings
    from server.main import create_app

    settings = Settings(home=module_tmp / "home", log_format="json", **FAST_JOB_SETTINGS)
    migrated(settings.db_url)
    worker = start_worker(settings, "json-logs", queues="cpu")
    with TestClient(create_app(settings)) as client:
        flow = ServiceFlow(client, make_token(settings, "rio"))
        job = flow.submit(flow.upload(onnx_models.mlp(seed=64))["id"])["id"]
        assert flow.wait(job, timeout=120)["status"] == "succeeded"
        # the worker logs the outcome, then Celery its own line, just after the commit
        lines = []
        for _ in range(50):
            lines = [json.loads(x) for x in worker.output().splitlines() if x.startswith("{")]
            if any(" succeeded in " in x["message"] and x["job_id"] == job for x in lines):
                break
            time.sleep(0.1)
    mine = [x for x in lines if x["job_id"] == job]
    messages = {x["message"] for x in mine}
    assert f"job {job}: succeeded" in messages and any(m.startswith(f"job {job}: attempt 1,") for m in messages)
    assert any(" succeeded in " in m for m in messages)  # Celery's own line for the task, too
    assert {x["tenant"] for x in mine} == {"rio"}
    assert all({"time", "level", "logger", "process"} <= set(x) for x in lines)
    # Lines outside any job (the worker starting) say so rather than borrowing one.
    assert any(x["job_id"] == "-" and x["tenant"] == "-" and " ready." in x["message"] for x in lines)
