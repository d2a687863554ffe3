"""Jobs and models pages: tenant isolation, escaping of model-derived strings, events, downloads."""

from fastapi.testclient import TestClient

from server.dashboard.auth import COOKIE_NAME
from server.db.models import Job, JobStatus
from server.db.session import transaction

from .dashboard_seed import SCRIPT


def test_jobs_page_lists_only_the_tenants_jobs(alice, seeded):
    html = alice.get("/jobs").text
    assert seeded.jobs["alice"][:12] in html and seeded.jobs["alice-failed"][:12] in html
    assert seeded.jobs["bob"][:12] not in html
    failed_only = alice.get("/jobs", params={"status": "failed"}).text
    assert seeded.jobs["alice-failed"][:12] in failed_only and seeded.jobs["alice"][:12] not in failed_only
    assert "Cache hit rate of your finished jobs over time" in html


def test_another_tenants_job_model_and_artifact_are_absent(alice, seeded):
    assert alice.get(f"/jobs/{seeded.jobs['bob']}").status_code == 404
    assert alice.get(f"/models/{seeded.models['bob']}").status_code == 404
    assert alice.get(f"/artifacts/{seeded.artifacts['bob']}").status_code == 404
    assert alice.get(f"/jobs/{seeded.jobs['bob']}/events").status_code == 404
    models = alice.get("/models").text
    assert seeded.models["alice"] in models and seeded.models["bob"] not in models


def test_job_page_shows_stages_cache_validation_and_artifact(alice, seeded):
    html = alice.get(f"/jobs/{seeded.jobs['alice']}").text
    assert f'href="/artifacts/{seeded.artifacts["alice"]}"' in html
    assert "1 hits, 1 misses" in html and "relative L2 error 1.2e-07" in html
    assert "Time per stage" in html and "build: 1.500 s" in html
    for stage in ("load", "lower", "schedule", "build", "validate"):
        assert f'data-stage="{stage}"' in html


def test_failed_job_shows_its_error_as_text(alice, seeded):
    html = alice.get(f"/jobs/{seeded.jobs['alice-failed']}").text
    assert "unsupported op &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert SCRIPT not in html


def test_model_derived_strings_render_as_text(alice, seeded):
    for url in ("/models", f"/models/{seeded.models['alice']}", "/jobs", f"/jobs/{seeded.jobs['alice']}",
                f"/kernels/{'01' * 32}"):
        html = alice.get(url).text
        assert SCRIPT not in html, url
        assert "<script>" not in html.replace('<script src="/static/dashboard.js" defer></script>', ""), url
    detail = alice.get(f"/models/{seeded.models['alice']}").text
    assert "x&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in detail  # the input's name
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;: 1" in detail  # the histogram chart's tooltip


def test_artifact_download_through_the_cookie(alice, seeded):
    r = alice.get(f"/artifacts/{seeded.artifacts['alice']}")
    assert r.status_code == 200 and r.content == seeded.artifact_bytes
    assert r.headers["content-type"] == "application/gzip"


def test_events_of_a_finished_job_end_the_stream(alice, seeded):
    with alice.stream("GET", f"/jobs/{seeded.jobs['alice']}/events") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        body = "".join(r.iter_text())
    assert "event: status" in body and '"status":"succeeded"' in body and "event: end" in body


def test_static_files_are_served_and_nothing_else(client):
    assert client.get("/static/dashboard.css").headers["content-type"].startswith("text/css")
    assert client.get("/static/dashboard.js").status_code == 200
    assert client.get("/static/..%2Fdashboard%2Fauth.py").status_code == 404
    assert client.get("/static/missing.css").status_code == 404


def test_cancel_from_the_job_page(alice, seeded, dashboard_app):
    with transaction(dashboard_app.state.sessions) as s:
        queued = Job(tenant_id=seeded.tenant_ids["alice"], model_id=seeded.models["alice"], target="cpu",
                     target_kind="cpu", task_id="t-cancel")
        s.add(queued)
        s.flush()
        queued_id = queued.id
    assert 'action="/jobs/' + queued_id + '/cancel"' in alice.get(f"/jobs/{queued_id}").text
    r = alice.post(f"/jobs/{queued_id}/cancel")
    assert r.status_code == 303 and r.headers["location"] == f"/jobs/{queued_id}"
    with dashboard_app.state.sessions() as s:
        assert s.get(Job, queued_id).status == JobStatus.cancelled
    finished = alice.post(f"/jobs/{seeded.jobs['alice']}/cancel")  # nothing to cancel: just show it
    assert finished.status_code == 303
    assert alice.post(f"/jobs/{seeded.jobs['bob']}/cancel").status_code == 404


def test_job_whose_validation_could_not_run_says_why(alice, seeded, dashboard_app):
    """A CUDA job compiled where no GPU is present: validation is 'not run', never 'passed'."""
    with transaction(dashboard_app.state.sessions) as s:
        job = Job(tenant_id=seeded.tenant_ids["alice"], model_id=seeded.models["alice"], target="cuda:h100",
                  target_kind="cuda", status=JobStatus.succeeded, stage="done", progress=1.0, attempts=1,
                  validation={"passed": None, "skipped": "not run: pycuda is not installed",
                              "rel_l2_error": None, "max_abs_error": None})
        s.add(job)
        s.flush()
        job_id = job.id
    html = alice.get(f"/jobs/{job_id}").text
    assert "not run" in html and "pycuda is not installed" in html
    assert 'badge succeeded">passed' not in html and 'badge failed">failed' not in html


def test_job_page_shows_a_validation_warning_escaped(alice, seeded, dashboard_app):
    """A model whose outputs vanished passed with a warning, which the job page shows (as text)."""
    warning = "onnxruntime's <b>y</b> holds no normal number"
    with transaction(dashboard_app.state.sessions) as s:
        job = Job(tenant_id=seeded.tenant_ids["alice"], model_id=seeded.models["alice"], target="cpu",
                  target_kind="cpu", status=JobStatus.succeeded, stage="done", progress=1.0, attempts=1,
                  validation={"passed": True, "rel_l2_error": 0.0, "max_abs_error": 0.0, "warning": warning})
        s.add(job)
        s.flush()
        job_id = job.id
    html = alice.get(f"/jobs/{job_id}").text
    assert 'badge succeeded">passed' in html
    assert "onnxruntime&#39;s &lt;b&gt;y&lt;/b&gt; holds no normal number" in html and warning not in html
    assert "warning" not in alice.get(f"/jobs/{seeded.jobs['alice']}").text.split("Validation", 1)[1].split("Attempts")[0]


def test_job_page_shows_the_roofline_most_time_lost_first(alice, seeded):
    html = alice.get(f"/jobs/{seeded.jobs['alice']}").text
    table = html[html.index('id="job-roofline"'):]
    table = table[:table.index("</table>")]
    assert "150.5 GFLOP/s, 12.2 GB/s DRAM" in html and "The 10 of 12 measured kernels" in html
    for column in ("Measured", "GFLOP/s", "GB/s", "Bound", "% of bound", "Time lost", "Why short"):
        assert f">{column}</th>" in table
    assert table.count("<tr>") == 1 + 10  # the header and the top rows
    assert table.index("Conv+Relu") < table.index("&lt;script&gt;") < table.index("Add")
    assert "11.1%" in table and "800 µs" in table and "2 tasks for 4 cores" in table
    assert SCRIPT not in table


def test_job_page_without_a_roofline_has_no_table(dashboard_app, seeded):
    bob = TestClient(dashboard_app, follow_redirects=False)
    bob.cookies.set(COOKIE_NAME, seeded.tokens["bob"])
    html = bob.get(f"/jobs/{seeded.jobs['bob']}").text
    assert "Kernels" in html and 'id="job-roofline"' not in html
