"""Endpoints that need no token, the kernel listing, and the OpenAPI document."""

from service_kit import auth, make_token

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
from server.db.session import make_engine, make_sessionmaker
from worker.kernel_cache import DatabaseKernelCache


def test_health_and_targets(api):
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200, ready.text
    targets = api.get("/v1/targets").json()
    names = {t["name"] for t in targets}
    assert "cpu" in names and all("fingerprint" in t for t in targets)
    assert "/v1/compilations/{job_id}/events" in api.get("/openapi.json").json()["paths"]


def test_readyz_names_the_unreachable_broker(embedded_settings):
    from fastapi.testclient import TestClient

    from server.main import create_app

    embedded_settings.celery_broker_url = "redis://127.0.0.1:1/0"
    with TestClient(create_app(embedded_settings)) as client:
        r = client.get("/readyz")
    assert r.status_code == 503 and "broker unreachable" in r.json()["detail"]


def _put(settings, op: str, target: str, stale: bool = False) -> str:
    sig = KernelSignature(op_pattern=op, shapes="[[2]]", dtypes='["float32"]', te_hash=op * 8,
                          target_fingerprint=target,
                          compiler_fingerprint="0" * 16 if stale else compiler_fingerprint(), options="{}")
    engine = make_engine(settings.db_url)
    try:
        DatabaseKernelCache(make_sessionmaker(engine)).put(
            KernelEntry(signature=sig, tile_config={"t": 1}, source=f"/* {op} */", binary=b"bin"))
    finally:
        engine.dispose()
    return sig.key


def test_kernel_cache_listing_filters_and_pages(api):
    token = auth(make_token(api.settings, "alice"))
    relu = _put(api.settings, "Relu", "cpu:x86_64:aaaa")
    a100 = _put(api.settings, "MatMul+Relu", "cuda:sm_80:bbbb")
    _put(api.settings, "Softmax", "cpu:x86_64:aaaa", stale=True)
    every = api.get("/v1/kernels", headers=token).json()
    assert every["total"] == 3 and "source" not in every["items"][0]
    assert {k["op_pattern"] for k in api.get("/v1/kernels", params={"target": "cpu"}, headers=token)
            .json()["items"]} == {"Relu", "Softmax"}
    assert api.get("/v1/kernels", params={"op": "Relu"}, headers=token).json()["total"] == 2
    for name in ("cuda:a100", "cuda:sm_80"):  # a target name, or a fingerprint prefix
        by_target = api.get("/v1/kernels", params={"target": name}, headers=token).json()["items"]
        assert [k["key"] for k in by_target] == [a100]
    stale = api.get("/v1/kernels", params={"stale": True}, headers=token).json()["items"]
    assert [k["op_pattern"] for k in stale] == ["Softmax"]
    page = api.get("/v1/kernels", params={"limit": 2, "offset": 2}, headers=token).json()
    assert len(page["items"]) == 1 and page["total"] == 3
    one = api.get(f"/v1/kernels/{relu}", headers=token).json()
    assert one["source"] == "/* Relu */" and one["binary_size"] == 3
    missing = api.get("/v1/kernels/" + "f" * 64, headers=token)
    assert missing.status_code == 404 and "not found" in missing.json()["detail"]
    bad_page = api.get("/v1/kernels", params={"limit": 0}, headers=token)
    assert bad_page.status_code == 422 and "limit" in bad_page.json()["detail"]
