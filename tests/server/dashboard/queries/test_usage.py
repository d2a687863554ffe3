"""Which of a tenant's jobs used a kernel, read from their artifacts' reports."""

from server.dashboard.queries.usage import kernel_uses
from server.db.models import Artifact
from server.db.session import transaction


def test_kernel_uses_read_the_report_and_stay_in_the_tenant(dashboard_app, seeded):
    key = "01" * 32
    with dashboard_app.state.sessions() as s:
        uses = kernel_uses(s, seeded.tenant_ids["alice"], key)
        assert [(u.job.id, u.symbols, u.cache_hit) for u in uses] == [(seeded.jobs["alice"], ["k0"], False)]
        assert kernel_uses(s, seeded.tenant_ids["bob"], key) == []


def test_a_key_elsewhere_in_the_report_does_not_count(dashboard_app, seeded):
    key = "01" * 32
    with transaction(dashboard_app.state.sessions) as s:
        artifact = s.get(Artifact, seeded.artifacts["alice"])
        artifact.report = {"kernels": [{"symbol": "k0", "key": "ff" * 32}], "note": key}
    with dashboard_app.state.sessions() as s:
        assert kernel_uses(s, seeded.tenant_ids["alice"], key) == []
