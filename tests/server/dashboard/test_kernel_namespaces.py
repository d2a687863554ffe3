"""The cache page and a kernel's page show which namespace a kernel is in, and never
another tenant's private kernels."""

from fastapi.testclient import TestClient

from server.dashboard.auth import COOKIE_NAME
from server.db.session import transaction
from server.services.quotas import set_limits
from tests.server.db.test_kernel_cache import entry
from worker.kernel_cache import DatabaseKernelCache


def test_private_kernels_show_to_their_tenant_only(dashboard_app, seeded, alice):
    sessions = dashboard_app.state.sessions
    with transaction(sessions) as s:
        set_limits(s, "alice", private_kernels=True)
    secret = entry(op="AliceSecretOp")
    DatabaseKernelCache(sessions, seeded.tenant_ids["alice"]).put(secret)

    page = alice.get("/?op=AliceSecretOp")
    assert page.status_code == 200 and "AliceSecretOp" in page.text and 'badge ns-private' in page.text
    own = alice.get(f"/kernels/{secret.key}")
    assert own.status_code == 200 and ">private</span>" in own.text

    bob = TestClient(dashboard_app, follow_redirects=False)
    bob.cookies.set(COOKIE_NAME, seeded.tokens["bob"])
    cache = bob.get("/")
    assert cache.status_code == 200 and "AliceSecretOp" not in cache.text and "ns-private" not in cache.text
    assert "badge ns-shared" in cache.text  # the seeded shared kernels
    assert bob.get(f"/kernels/{secret.key}").status_code == 404
