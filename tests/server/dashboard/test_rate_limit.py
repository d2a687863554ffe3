"""Dashboard pages count against the tenant's request rate, as API calls do: 429 with
`Retry-After` over it, for that tenant only."""

from fastapi.testclient import TestClient

from server.db.session import transaction
from server.services.quotas import set_limits


def test_dashboard_pages_share_the_tenants_request_rate(dashboard_app, seeded, alice):
    with transaction(dashboard_app.state.sessions) as s:
        set_limits(s, "alice", requests_per_minute=3)
    assert [alice.get("/models").status_code for _ in range(2)] == [200, 200]
    # An API call draws on the same bucket: one request left, then none.
    token = {"Authorization": f"Bearer {seeded.tokens['alice']}"}
    assert alice.get("/v1/models", headers=token).status_code == 200
    r = alice.get("/jobs")
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 20
    assert "3 requests per minute" in r.text
    other = TestClient(dashboard_app, follow_redirects=False)
    other.cookies.set("tileforge_token", seeded.tokens["bob"])
    assert other.get("/models").status_code == 200  # another tenant is not held back
