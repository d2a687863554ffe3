"""Per-tenant quotas and request rates: defaults from the settings, overrides per tenant in
the database, refusals that name the limit (403 / 413; 429 with Retry-After)."""

from fastapi.testclient import TestClient
from service_kit import auth, make_token

from server.db.session import one_off_transaction
from server.main import create_app
from server.services.quotas import set_limits


def _limit(settings, tenant: str, **overrides) -> None:
    with one_off_transaction(settings.db_url) as s:
        set_limits(s, tenant, **overrides)


def _upload(client, token: str, data: bytes):
    return client.post("/v1/models", headers=auth(token), files={"file": ("m.onnx", data)})


def test_model_count_limit_is_per_tenant(tenant_api, onnx_models):
    settings = tenant_api.settings
    eve, fay = make_token(settings, "eve"), make_token(settings, "fay")
    _limit(settings, "eve", max_models=1)
    first = onnx_models.mlp(seed=3)
    assert _upload(tenant_api, eve, first).status_code == 201
    assert _upload(tenant_api, eve, first).status_code == 200  # the same bytes: no new model
    r = _upload(tenant_api, eve, onnx_models.mlp(seed=4))
    assert r.status_code == 403
    assert "model limit" in r.json()["detail"] and "TILEFORGE_TENANT_MAX_MODELS" in r.json()["detail"]
    assert _upload(tenant_api, fay, onnx_models.mlp(seed=4)).status_code == 201  # another tenant: the default
    _limit(settings, "eve", max_models=None)  # back to the default
    assert _upload(tenant_api, eve, onnx_models.mlp(seed=4)).status_code == 201


def test_stored_bytes_limit_refuses_the_upload_and_keeps_no_blob(tenant_api, onnx_models):
    settings = tenant_api.settings
    token = make_token(settings, "gus")
    small = onnx_models.mlp(seed=5)
    _limit(settings, "gus", max_stored_bytes=len(small) + 100)
    assert _upload(tenant_api, token, small).status_code == 201
    big = onnx_models.mlp(seed=6)
    r = _upload(tenant_api, token, big)
    assert r.status_code == 413
    assert "stored-bytes limit" in r.json()["detail"] and "TILEFORGE_TENANT_MAX_STORED_BYTES" in r.json()["detail"]
    import hashlib
    assert not tenant_api.app.state.storage.exists(hashlib.sha256(big).hexdigest())


def test_active_jobs_limit_counts_queued_and_running(tenant_api, onnx_models):
    settings = tenant_api.settings
    token = make_token(settings, "hal")
    _limit(settings, "hal", max_active_jobs=2)
    model = _upload(tenant_api, token, onnx_models.mlp(seed=7)).json()["id"]
    r = tenant_api.post("/v1/compilations", headers=auth(token),
                        json={"model_id": model, "targets": ["cpu", "cuda:a100", "cuda:h100"]})
    assert r.status_code == 403 and "active-jobs limit" in r.json()["detail"]
    assert tenant_api.post("/v1/compilations", headers=auth(token),
                           json={"model_id": model, "targets": ["cpu", "cuda:a100"]}).status_code == 202
    r = tenant_api.post("/v1/compilations", headers=auth(token), json={"model_id": model, "target": "cpu"})
    assert r.status_code == 403 and "has 2 queued or running" in r.json()["detail"]


def test_request_rate_is_limited_per_tenant_with_retry_after(tenant_api):
    settings = tenant_api.settings
    ivy, joe = make_token(settings, "ivy"), make_token(settings, "joe")
    _limit(settings, "ivy", requests_per_minute=3)
    assert [tenant_api.get("/v1/models", headers=auth(ivy)).status_code for _ in range(3)] == [200] * 3
    r = tenant_api.get("/v1/models", headers=auth(ivy))
    assert r.status_code == 429
    assert "3 requests per minute" in r.json()["detail"]
    assert 1 <= int(r.headers["Retry-After"]) <= 20  # one request comes back every 20 s
    assert tenant_api.get("/v1/models", headers=auth(joe)).status_code == 200  # others are not held back


def test_api_processes_share_the_rate_limit_through_redis_only_when_there_is_one(tenant_api):
    settings = tenant_api.settings
    token = make_token(settings, "kit")
    _limit(settings, "kit", requests_per_minute=2)
    assert [tenant_api.get("/v1/models", headers=auth(token)).status_code for _ in range(2)] == [200, 200]
    with TestClient(create_app(settings)) as other:  # a second API process on the same settings
        answer = other.get("/v1/models", headers=auth(token)).status_code
    assert answer == (429 if settings.rate_limit_redis_url else 200)
