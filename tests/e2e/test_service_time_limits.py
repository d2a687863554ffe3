"""Soft and hard time limits with real `celery worker` subprocesses (embedded default):
each ends the job as failed with the limit named, never leaving it running."""

import pytest
from service_kit import FAST_JOB_SETTINGS, ServiceFlow, make_token

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(module_tmp):
    from service_kit import migrated

    from server.core.config import Settings

    migrated(Settings(home=module_tmp).db_url)
    return module_tmp


def _flow_with_limits(home, start_worker, name: str, soft: int, hard: int):
    from fastapi.testclient import TestClient

    from server.core.config import Settings
    from server.main import create_app

    settings = Settings(home=home, queue_prefix=name, job_soft_time_limit=soft, job_hard_time_limit=hard,
                        **FAST_JOB_SETTINGS)
    start_worker(settings, name)
    return TestClient(create_app(settings)), make_token(settings, name)


def test_soft_limit_stops_the_compile(home, start_worker, onnx_models):
    client, token = _flow_with_limits(home, start_worker, "soft", soft=1, hard=60)
    with client:
        flow = ServiceFlow(client, token)
        done = flow.wait(flow.submit(flow.upload(onnx_models.deep(128))["id"])["id"], timeout=120)
    assert done["status"] == "failed" and "time limit of 1 s" in done["error"], done
    assert done["attempts"] == 1 and done["artifact_id"] is None


def test_hard_limit_kills_the_compile(home, start_worker, onnx_models):
    client, token = _flow_with_limits(home, start_worker, "hard", soft=60, hard=1)
    with client:
        flow = ServiceFlow(client, token)
        done = flow.wait(flow.submit(flow.upload(onnx_models.deep(128))["id"])["id"], timeout=120)
    assert done["status"] == "failed" and "hard time limit of 1 s" in done["error"], done
    assert done["artifact_id"] is None
