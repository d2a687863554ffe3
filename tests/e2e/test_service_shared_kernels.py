"""Two models that share kernels, compiled at once by two workers on PostgreSQL + Redis:
each kernel is stored once, and a later job gets the shared ones from the cache."""

import pytest
from service_kit import ServiceFlow, make_token
from sqlalchemy import func, select

from server.db.models import Kernel
from server.db.session import make_engine, make_sessionmaker

pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.fixture(scope="module")
def flow(pg_redis_settings, start_worker):
    from fastapi.testclient import TestClient

    from server.main import create_app

    start_worker(pg_redis_settings, "w1")
    start_worker(pg_redis_settings, "w2")
    with TestClient(create_app(pg_redis_settings)) as client:
        yield ServiceFlow(client, make_token(pg_redis_settings, "alice"))


def _kernel_keys(flow, job: dict) -> list[str]:
    report = flow.client.get(f"/v1/artifacts/{job['artifact_id']}/report", headers=flow.headers).json()
    return [k["key"] for k in report["kernels"]]


def test_two_workers_share_kernels_and_store_each_once(flow, pg_redis_settings, onnx_models):
    # Same first layer shapes, different weights and output widths: MatMul+Relu is shared.
    a = flow.upload(onnx_models.mlp(seed=31, hidden=24, out=8))
    b = flow.upload(onnx_models.mlp(seed=32, hidden=24, out=12))
    jobs = [flow.submit(a["id"]), flow.submit(b["id"])]
    done = [flow.wait(j["id"]) for j in jobs]
    assert [d["status"] for d in done] == ["succeeded", "succeeded"], [d["error"] for d in done]
    assert {d["worker"] for d in done} == {f"w1@{pg_redis_settings.queue_prefix}",
                                           f"w2@{pg_redis_settings.queue_prefix}"}
    keys_a, keys_b = _kernel_keys(flow, done[0]), _kernel_keys(flow, done[1])
    shared = set(keys_a) & set(keys_b)
    assert shared, "the two models were meant to share a kernel"
    engine = make_engine(pg_redis_settings.db_url)
    with make_sessionmaker(engine)() as s:
        rows = s.scalar(select(func.count()).select_from(Kernel).where(Kernel.key.in_(set(keys_a) | set(keys_b))))
    engine.dispose()
    assert rows == len(set(keys_a) | set(keys_b))  # each stored once, though both may have built it

    later = flow.wait(flow.submit(flow.upload(onnx_models.mlp(seed=33, hidden=24, out=4))["id"])["id"])
    assert later["status"] == "succeeded", later["error"]
    assert later["cache_hits"] >= len(shared & set(_kernel_keys(flow, later))) >= 1
