"""Token scope, expiry and revocation, checked on every request: the API, the upload's early
token check, and the dashboard's cookie."""

from datetime import timedelta

from service_kit import auth
from sqlalchemy import select

from server.core.security import READ, create_token
from server.dashboard.auth import COOKIE_NAME
from server.db.models import Token
from server.db.session import one_off_transaction
from server.services.tokens import list_tokens, revoke_token


def _token(settings, tenant: str, **kw) -> str:
    with one_off_transaction(settings.db_url) as s:
        return create_token(s, tenant, **kw)


def _token_row(settings, tenant: str) -> Token:
    with one_off_transaction(settings.db_url) as s:
        return [t for t, _ in list_tokens(s, tenant)][-1]


def test_a_read_token_reads_but_changes_nothing(tenant_api, onnx_models):
    writer = _token(tenant_api.settings, "ann")
    reader = _token(tenant_api.settings, "ann", scope=READ)
    model = tenant_api.post("/v1/models", headers=auth(writer), files={"file": ("m.onnx", onnx_models.mlp(seed=1))})
    assert model.status_code == 201
    model_id = model.json()["id"]
    assert tenant_api.get(f"/v1/models/{model_id}", headers=auth(reader)).status_code == 200
    assert tenant_api.get("/v1/kernels", headers=auth(reader)).status_code == 200
    refusals = [
        tenant_api.post("/v1/models", headers=auth(reader), files={"file": ("m.onnx", onnx_models.mlp(seed=2))}),
        tenant_api.post("/v1/compilations", headers=auth(reader), json={"model_id": model_id, "target": "cpu"}),
        tenant_api.delete(f"/v1/models/{model_id}", headers=auth(reader)),
    ]
    for r in refusals:
        assert r.status_code == 403, r.text
        assert "scope is 'read'" in r.json()["detail"] and "'write' token" in r.json()["detail"]
    assert tenant_api.get("/v1/models", headers=auth(reader)).json()["total"] == 1  # nothing changed


def test_an_expired_token_is_refused_at_once(tenant_api):
    settings = tenant_api.settings
    live = _token(settings, "bea", expires_in=timedelta(hours=1))
    gone = _token(settings, "bea", expires_in=timedelta(seconds=-1))
    assert tenant_api.get("/v1/models", headers=auth(live)).status_code == 200
    r = tenant_api.get("/v1/models", headers=auth(gone))
    assert r.status_code == 401 and "expired" in r.json()["detail"]
    upload = tenant_api.post("/v1/models", headers=auth(gone), files={"file": ("m.onnx", b"x" * 10)})
    assert upload.status_code == 401  # refused by the early check, before the body


def test_a_revoked_token_stops_working_on_the_next_request_in_api_and_dashboard(tenant_api):
    settings = tenant_api.settings
    token = _token(settings, "cid")
    assert tenant_api.post("/login", data={"token": token}).status_code == 303
    tenant_api.cookies.set(COOKIE_NAME, token)
    assert tenant_api.get("/models").status_code == 200
    assert tenant_api.get("/v1/models", headers=auth(token)).status_code == 200
    row = _token_row(settings, "cid")
    assert row.last_used_at is not None  # recorded by the requests above

    with one_off_transaction(settings.db_url) as s:
        assert revoke_token(s, row.id) is True
    assert tenant_api.get("/v1/models", headers=auth(token)).status_code == 401
    page = tenant_api.get("/models")
    assert page.status_code == 303 and page.headers["location"].startswith("/login")
    with one_off_transaction(settings.db_url) as s:
        assert revoke_token(s, row.id) is False  # already revoked
        assert s.scalar(select(Token.revoked).where(Token.id == row.id)) is True


def test_a_read_token_cannot_post_dashboard_forms(tenant_api):
    reader = _token(tenant_api.settings, "dan", scope=READ)
    tenant_api.cookies.set(COOKIE_NAME, reader)
    assert tenant_api.get("/models").status_code == 200
    r = tenant_api.post("/models", files={"file": ("m.onnx", b"not onnx")})
    assert r.status_code == 403 and "scope is 'read'" in r.text
