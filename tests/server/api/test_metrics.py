"""GET /metrics on the embedded default and on PostgreSQL: jobs by state, queue depth, stage
durations and cache counts read from the database (a job run by the real pipeline), request
latency by route template, and who may scrape."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from service_kit import auth, make_token, run_job_in_process


def _scrape(app, host: str = "127.0.0.1", headers: dict | None = None):
    return TestClient(app, client=(host, 40000)).get("/metrics", headers=headers or {})


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, from the text format parsed by prometheus-client."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_report_jobs_stages_cache_and_requests(tenant_api, onnx_models):
    settings = tenant_api.settings
    headers = auth(make_token(settings, "mia"))
    model = tenant_api.post("/v1/models", headers=headers, files={"file": ("m.onnx", onnx_models.mlp(seed=61))})
    jobs = [tenant_api.post("/v1/compilations", headers=headers,
                            json={"model_id": model.json()["id"], "target": "cpu"}).json()["id"] for _ in range(2)]
    assert tenant_api.get(f"/v1/compilations/{jobs[0]}", headers=headers).status_code == 200
    before = _samples(_scrape(tenant_api.app).text)
    queue = settings.queue_for("cpu")
    assert before[("tileforge_jobs", (("kind", "compile"), ("state", "queued")))] == 2
    assert before[("tileforge_queue_depth", (("queue", queue),))] == 2
    assert before[("tileforge_kernel_cache_misses_total", ())] == 0

    assert run_job_in_process(settings, jobs[0]) == "succeeded"
    built = tenant_api.get(f"/v1/compilations/{jobs[0]}", headers=headers).json()
    r = _scrape(tenant_api.app)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    after = _samples(r.text)
    assert after[("tileforge_jobs", (("kind", "compile"), ("state", "succeeded")))] == 1
    assert after[("tileforge_jobs", (("kind", "compile"), ("state", "queued")))] == 1
    assert after[("tileforge_queue_depth", (("queue", queue),))] == 1
    assert after[("tileforge_kernel_cache_misses_total", ())] == built["cache_misses"] > 0
    assert after[("tileforge_kernel_cache_hits_total", ())] == built["cache_hits"]
    for stage, seconds in built["stage_seconds"].items():  # one observation per stage, of its time
        labels = (("stage", stage),)
        assert after[("tileforge_job_stage_duration_seconds_count", labels)] == 1
        assert after[("tileforge_job_stage_duration_seconds_sum", labels)] == pytest.approx(seconds)
        assert after[("tileforge_job_stage_duration_seconds_bucket", (("le", "+Inf"), *labels))] == 1
    # Latency by route template, not by raw path: both job ids fall in one series.
    route = (("method", "GET"), ("route", "/v1/compilations/{job_id}"), ("status", "200"))
    assert after[("tileforge_http_request_duration_seconds_count", route)] >= 2


def test_metrics_are_for_this_host_or_the_metrics_token(tenant_api):
    r = _scrape(tenant_api.app, host="203.0.113.9")
    assert r.status_code == 403 and "TILEFORGE_METRICS_TOKEN" in r.json()["detail"]
    assert _scrape(tenant_api.app, host="::1").status_code == 200
    settings = tenant_api.settings.model_copy(update={"metrics_token": "scrape-me"})
    tenant_api.app.state.settings = settings
    assert _scrape(tenant_api.app, host="203.0.113.9", headers=auth("scrape-me")).status_code == 200
    assert _scrape(tenant_api.app, host="127.0.0.1").status_code == 401  # the token is asked of everyone
    assert _scrape(tenant_api.app, host="127.0.0.1", headers=auth(make_token(settings, "ned"))).status_code == 401


def test_another_api_process_reports_the_same_job_numbers(tenant_api, onnx_models):
    from server.main import create_app

    settings = tenant_api.settings
    headers = auth(make_token(settings, "ona"))
    model = tenant_api.post("/v1/models", headers=headers, files={"file": ("m.onnx", onnx_models.mlp(seed=62))})
    tenant_api.post("/v1/compilations", headers=headers, json={"model_id": model.json()["id"], "target": "cpu"})
    # A second app on the same database stands for a second API process: it served no request,
    # yet its job numbers are the first one's (they are read from the database, not counted).
    other = _samples(_scrape(create_app(settings)).text)
    mine = _samples(_scrape(tenant_api.app).text)
    job_series = {k for k in mine if not k[0].startswith("tileforge_http")}
    assert job_series and {k: mine[k] for k in job_series} == {k: other[k] for k in job_series}
    assert other[("tileforge_jobs", (("kind", "compile"), ("state", "queued")))] == 1
