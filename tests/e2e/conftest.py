"""The `service` fixture of the client's end-to-end tests: one real uvicorn and one real
`celery worker` per backend for the whole module, on the embedded default (SQLite, SQLite
broker) and on PostgreSQL + Redis. The worker takes CPU jobs only, so CUDA jobs wait in
their queue."""

import pytest
from service_kit import (
    FAST_JOB_SETTINGS,
    INFERENCE_LIMIT,
    UPLOAD_LIMIT,
    ClientService,
    make_token,
    migrated,
)


@pytest.fixture(scope="module", params=["embedded", pytest.param("postgres_redis", marks=pytest.mark.services)])
def service(request, module_tmp, start_worker, start_server) -> ClientService:
    from server.core.config import Settings

    limits = {"max_upload_bytes": UPLOAD_LIMIT, "max_inference_bytes": INFERENCE_LIMIT}
    if request.param == "embedded":
        settings = Settings(home=module_tmp / "home", **limits, **FAST_JOB_SETTINGS)
        migrated(settings.db_url)
    else:
        settings = request.getfixturevalue("pg_redis_settings").model_copy(update=limits)
    worker = start_worker(settings, f"client-{request.param}", queues="cpu")
    yield ClientService(start_server(settings), make_token(settings, "alice"))
    worker.kill()  # the other backend's tests need the CPU
