"""/metrics with two API processes: job numbers come from the database, so both report the
same; with PROMETHEUS_MULTIPROC_DIR set (prometheus-client's multiprocess mode) each reports
the request latency of both."""

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from service_kit import FAST_JOB_SETTINGS, auth, live_api, make_token, migrated

pytestmark = pytest.mark.slow


def _requests_to_models(text: str) -> float:
    """Requests counted for GET /v1/models (any status) in a scrape."""
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "tileforge_http_request_duration_seconds_count"
               and s.labels.get("route") == "/v1/models" and s.labels.get("method") == "GET")


def test_two_api_processes_report_one_service(module_tmp, monkeypatch, onnx_models):
    from server.core.config import Settings

    settings = Settings(home=module_tmp / "home", **FAST_JOB_SETTINGS)
    migrated(settings.db_url)
    token = make_token(settings, "pia")
    (module_tmp / "prom").mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(module_tmp / "prom"))
    with live_api(settings, module_tmp / "a.log") as a, live_api(settings, module_tmp / "b.log") as b:
        model = httpx.post(f"{a}/v1/models", headers=auth(token), timeout=60,
                           files={"file": ("m.onnx", onnx_models.mlp(seed=66))}).json()["id"]
        httpx.post(f"{b}/v1/compilations", headers=auth(token), json={"model_id": model, "target": "cpu"}, timeout=60)
        for url, times in ((a, 3), (b, 4)):
            for _ in range(times):
                assert httpx.get(f"{url}/v1/models", headers=auth(token), timeout=60).status_code == 200
        scrapes = [httpx.get(f"{url}/metrics", timeout=60).text for url in (a, b)]
    assert [_requests_to_models(text) for text in scrapes] == [7, 7]  # both processes' requests
    jobs = [[line for line in text.splitlines() if line.startswith("tileforge_jobs{")] for text in scrapes]
    assert jobs[0] == jobs[1] and 'tileforge_jobs{kind="compile",state="queued"} 1.0' in jobs[0]
