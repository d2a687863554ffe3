"""Private kernel namespaces: a private tenant's kernels are reused only by its own
compiles and seen only by it; other tenants see the shared cache alone (SQLite and
PostgreSQL)."""

import dataclasses

import pytest
from service_kit import auth, make_token
from test_kernel_cache import entry

from server.core.security import create_token
from server.db.kernel_namespace import compiler_key, kernel_namespace
from server.db.models import Tenant
from server.db.session import transaction
from server.services.errors import ServiceError
from server.services.kernels import get_kernel, list_kernels
from server.services.quotas import set_limits
from worker.kernel_cache import DatabaseKernelCache


def _tenants(sessions) -> tuple[Tenant, Tenant]:
    """Tenants `private-co` (private kernels) and `open-co`."""
    with transaction(sessions) as s:
        create_token(s, "private-co")
        create_token(s, "open-co")
        set_limits(s, "private-co", private_kernels=True)
    with sessions() as s:
        return tuple(s.query(Tenant).filter(Tenant.name == n).one() for n in ("private-co", "open-co"))


def test_private_kernels_are_reused_and_seen_only_by_their_tenant(db_sessions):
    private, public = _tenants(db_sessions)
    with db_sessions() as s:
        assert kernel_namespace(s, private.id) == private.id and kernel_namespace(s, public.id) is None
    shared_cache = DatabaseKernelCache(db_sessions)
    private_cache = shared_cache.in_namespace(private.id)
    secret = entry(op="SecretOp")
    private_cache.put(secret)
    shared_cache.put(entry(op="MatMul"))

    assert shared_cache.get(secret.signature) is None  # another tenant's compile does not reuse it
    assert private_cache.get(secret.signature) == secret  # its own does
    with db_sessions() as s:
        seen_by_public, total = list_kernels(s, public, 50, 0)
        assert [k.op_pattern for k in seen_by_public] == ["MatMul"] and total == 1
        seen_by_private, total = list_kernels(s, private, 50, 0)
        assert {(k.op_pattern, k.namespace) for k in seen_by_private} == {("MatMul", None), ("SecretOp", private.id)}
        # the key a job's report names finds the tenant's own private row; nobody else's
        assert get_kernel(s, private, secret.key).op_pattern == "SecretOp"
        row_key = next(k.key for k in seen_by_private if k.namespace)
        assert row_key != secret.key and compiler_key(get_kernel(s, private, row_key)) == secret.key
        assert get_kernel(s, private, row_key).op_pattern == "SecretOp"
        for key in (secret.key, row_key):
            with pytest.raises(ServiceError) as refused:
                get_kernel(s, public, key)
            assert refused.value.status == 404


def test_a_private_tenant_builds_its_own_copy_of_a_shared_kernel(db_sessions):
    private, _ = _tenants(db_sessions)
    shared_cache = DatabaseKernelCache(db_sessions)
    common = entry(op="Relu")
    shared_cache.put(common)
    private_cache = shared_cache.in_namespace(private.id)
    assert private_cache.get(common.signature) is None  # no read of shared rows: a hit would leave a trace
    private_cache.put(dataclasses.replace(common, source="void k0(void) { /* mine */ }"))
    assert shared_cache.get(common.signature).source == common.source  # the shared row is untouched
    assert "mine" in private_cache.get(common.signature).source


def test_the_api_names_each_kernels_namespace(api, onnx_models):
    sessions = api.app.state.sessions
    private, _ = _tenants(sessions)
    token, other = make_token(api.settings, "private-co"), make_token(api.settings, "open-co")
    DatabaseKernelCache(sessions).put(entry(op="MatMul"))
    DatabaseKernelCache(sessions, private.id).put(entry(op="SecretOp"))
    items = api.get("/v1/kernels", headers=auth(token)).json()["items"]
    assert {(k["op_pattern"], k["namespace"]) for k in items} == {("MatMul", "shared"), ("SecretOp", "private")}
    items = api.get("/v1/kernels", headers=auth(other)).json()["items"]
    assert [(k["op_pattern"], k["namespace"]) for k in items] == [("MatMul", "shared")]
    detail = api.get(f"/v1/kernels/{entry(op='SecretOp').key}", headers=auth(token))
    assert detail.status_code == 200 and detail.json()["namespace"] == "private"
    assert api.get(f"/v1/kernels/{entry(op='SecretOp').key}", headers=auth(other)).status_code == 404

