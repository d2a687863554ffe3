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


def _announced_models(module_tmp) -> set[str]:
    from sqlalchemy import select

    from server.core.config import Settings
    from server.db.models import WorkerHost
    from server.db.session import make_engine, make_sessionmaker

    settings = Settings(home=module_tmp / "home", **FAST_JOB_SETTINGS)
    engine = make_engine(settings.db_url)
    try:
        with make_sessionmaker(engine)() as s:
            return {m for models in s.scalars(select(WorkerHost.cpu_models)) for m in models}
    finally:
        engine.dispose()


def test_a_named_cpu_target_is_compiled_validated_and_runs(flow, onnx_models, tmp_path, module_tmp):
    import time

    deadline = time.monotonic() + 30
    while "x86-64-v3" not in _announced_models(module_tmp):  # the worker says what its host runs
        assert time.monotonic() < deadline, "the worker never announced the CPU models it runs"
        time.sleep(0.2)
    data = onnx_models.mlp(seed=23)
    done = flow.wait(flow.submit(flow.upload(data)["id"], "cpu:x86-64-v3")["id"])
    assert done["status"] == "succeeded", done
    assert done["validation"]["passed"] is True and done["validated"] is True
    assert done["validation"]["validated_on"]  # where it ran against onnxruntime
    flow.assert_runs_like_onnxruntime(flow.download(done, tmp_path), data)


def test_a_target_no_worker_can_run_is_cross_compiled_and_says_so(flow, onnx_models):
    from compiler.target import get_target, list_targets
    from compiler.target.cpu import host_cannot_run

    foreign = [n for n in list_targets() if n.startswith("cpu:") and host_cannot_run(get_target(n))]
    if not foreign:
        pytest.skip("this host runs every named CPU model")
    done = flow.wait(flow.submit(flow.upload(onnx_models.mlp(seed=24))["id"], foreign[0])["id"])
    assert done["status"] == "succeeded", done
    assert done["validation"]["passed"] is None and done["validated"] is False
    assert done["validation_note"].startswith("not validated on this ISA"), done["validation"]


def test_a_cuda_job_cross_compiled_without_a_gpu_says_it_was_not_validated(flow, onnx_models):
    """This module's worker takes the CUDA queue by choice (TILEFORGE_WORKER_QUEUES=cpu,cuda);
    on a host without a GPU its CUDA artifacts are built but never run: the job says so."""
    from compiler.runtime.cuda import gpu_runs
    from compiler.target.toolchain import find_tool

    if gpu_runs("sm_90") or find_tool("nvcc") is None:
        pytest.skip("needs nvcc and no sm_90 GPU (where one runs the job it is validated)")
    done = flow.wait(flow.submit(flow.upload(onnx_models.mlp(seed=25))["id"], "cuda:h100")["id"])
    assert done["status"] == "succeeded", done
    assert done["validated"] is False and done["validation"]["passed"] is None
    assert done["validation_note"] == done["validation"]["skipped"] and done["validation_note"]
