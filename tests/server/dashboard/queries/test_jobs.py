"""Job queries: tenant scoping, status filter, and the hit rate over time."""

from datetime import timedelta

from server.dashboard.queries.jobs import get_job, hit_rate_over_time, job_page, status_counts
from server.db.models import Job, JobStatus
from server.db.session import transaction
from server.db.types import utcnow


def test_jobs_are_scoped_to_their_tenant(dashboard_app, seeded):
    with dashboard_app.state.sessions() as s:
        alice = seeded.tenant_ids["alice"]
        page = job_page(s, alice)
        assert {r.job.id for r in page.rows} == {seeded.jobs["alice"], seeded.jobs["alice-failed"]}
        assert [r.job.id for r in job_page(s, alice, status="failed").rows] == [seeded.jobs["alice-failed"]]
        assert get_job(s, alice, seeded.jobs["bob"]) is None
        row = get_job(s, alice, seeded.jobs["alice"])
        assert row.artifact.id == seeded.artifacts["alice"] and not row.active and row.seconds == 3.0
        assert status_counts(s, alice) == {"succeeded": 1, "failed": 1}


def test_hit_rate_over_time_sums_hits_and_lookups_per_slice(dashboard_app, seeded):
    alice, model = seeded.tenant_ids["alice"], seeded.models["alice"]
    start = utcnow() - timedelta(hours=10)
    with transaction(dashboard_app.state.sessions) as s:
        s.query(Job).delete()
        for minutes, hits, misses in ((0, 0, 4), (1, 2, 2), (600, 3, 1), (300, None, None)):
            s.add(Job(tenant_id=alice, model_id=model, target="cpu", target_kind="cpu",
                      status=JobStatus.succeeded, cache_hits=hits, cache_misses=misses,
                      finished_at=start + timedelta(minutes=minutes)))
    with dashboard_app.state.sessions() as s:
        points = hit_rate_over_time(s, alice, buckets=4)
        assert points == [(start + timedelta(minutes=1), 2 / 8), (start + timedelta(minutes=600), 3 / 4)]
        assert hit_rate_over_time(s, seeded.tenant_ids["bob"]) == []
