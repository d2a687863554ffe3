"""Compile jobs through the API (no worker here: jobs stay queued unless the test moves them)."""

import json

from service_kit import auth, make_token

from server.db.models import Job
from server.db.session import one_off_transaction
from server.db.types import utcnow


def _setup(api, onnx_models):
    token = make_token(api.settings, "alice")
    model = api.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp())}, headers=auth(token)).json()
    return token, model


def _set_job(settings, job_id, **values):
    with one_off_transaction(settings.db_url) as s:
        job = s.get(Job, job_id)
        for k, v in values.items():
            setattr(job, k, v)


def test_submit_returns_a_queued_job(api, onnx_models):
    token, model = _setup(api, onnx_models)
    r = api.post("/v1/compilations", json={"model_id": model["id"], "target": "cpu", "options": {}},
                 headers=auth(token))
    assert r.status_code == 202, r.text
    job = r.json()
    assert (job["status"], job["progress"], job["model_id"], job["artifact_id"]) == \
        ("queued", 0.0, model["id"], None)
    assert api.get(f"/v1/compilations/{job['id']}", headers=auth(token)).json()["id"] == job["id"]
    listed = api.get("/v1/compilations", params={"status": "queued"}, headers=auth(token)).json()
    assert [j["id"] for j in listed["items"]] == [job["id"]]


def test_cancel_a_queued_job_then_cancel_again(api, onnx_models):
    token, model = _setup(api, onnx_models)
    job = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=auth(token)).json()
    r = api.post(f"/v1/compilations/{job['id']}/cancel", headers=auth(token))
    assert r.status_code == 202 and r.json()["status"] == "cancelled"
    again = api.post(f"/v1/compilations/{job['id']}/cancel", headers=auth(token))
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]


def test_events_stream_until_the_job_ends(api, onnx_models):
    token, model = _setup(api, onnx_models)
    job = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=auth(token)).json()
    _set_job(api.settings, job["id"], status="failed", error="boom", finished_at=utcnow())
    with api.stream("GET", f"/v1/compilations/{job['id']}/events", headers=auth(token)) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        body = "".join(r.iter_text())
    events = [block for block in body.split("\n\n") if block.strip()]
    status = json.loads(events[0].split("data: ", 1)[1])
    assert (status["status"], status["error"]) == ("failed", "boom")
    assert events[-1].startswith("event: end")


def test_a_job_that_passed_on_vanished_outputs_carries_the_warning(api, onnx_models):
    """A passing validation whose reference outputs held no normal number says so in
    `validation_warning`; a job still running, or one not validated, has none."""
    from server.db.models import JobStatus

    token, model = _setup(api, onnx_models)
    job = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=auth(token)).json()
    warning = "onnxruntime's y holds no normal number (all zero, subnormal or not finite) on the random inputs"
    validation = {"passed": True, "rel_l2_error": 0.0, "max_abs_error": 0.0, "warning": warning}
    _set_job(api.settings, job["id"], validation=validation)
    running = api.get(f"/v1/compilations/{job['id']}", headers=auth(token)).json()
    assert running["validation_warning"] is None
    _set_job(api.settings, job["id"], status=JobStatus.succeeded, stage="done", progress=1.0)
    done = api.get(f"/v1/compilations/{job['id']}", headers=auth(token)).json()
    assert done["validated"] is True and done["validation_warning"] == warning
    _set_job(api.settings, job["id"], validation={"passed": True, "rel_l2_error": 1e-7})
    assert api.get(f"/v1/compilations/{job['id']}", headers=auth(token)).json()["validation_warning"] is None
