"""The same flow on the embedded default: SQLite, the local folder and an SQLite broker,
with a real `celery worker` subprocess and no servers."""

import pytest
from service_kit import FAST_JOB_SETTINGS, ServiceFlow, make_token, migrated

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def flow(module_tmp, start_worker):
    from fastapi.testclient import TestClient

    from server.core.config import Settings
    from server.main import create_app

    settings = Settings(home=module_tmp / "home", **FAST_JOB_SETTINGS)
    assert settings.is_embedded_broker and settings.db_url.startswith("sqlite")
    migrated(settings.db_url)
    start_worker(settings, "embedded", queues="cpu,cuda")
    with TestClient(create_app(settings)) as client:
        yield ServiceFlow(client, make_token(settings, "alice"))


def test_upload_compile_watch_download_run(flow, onnx_models, tmp_path):
    data = onnx_models.mlp(seed=21, tail="Sigmoid")
    job = flow.submit(flow.upload(data)["id"], "cpu")
    events = flow.events(job["id"])
    assert events[-1]["status"] == "succeeded", events[-1]["error"]
    done = flow.job(job["id"])
    assert done == events[-1]
    assert done["validation"]["passed"] and done["cache_misses"] > 0
    flow.assert_runs_like_onnxruntime(flow.download(done, tmp_path), data)


def test_a_model_the_compiler_refuses_fails_with_the_reason(flow, onnx_models):
    model = flow.upload(onnx_models.mlp(seed=22))
    job = flow.submit(model["id"], options={"input_shapes": {"no_such_input": [1, 2]}})
    done = flow.wait(job["id"])
    assert done["status"] == "failed" and "no_such_input" in done["error"], done
    assert done["attempts"] == 1 and done["artifact_id"] is None
