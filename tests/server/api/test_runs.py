"""Profile and inference jobs through the API, with no worker (they stay queued): what a
submission checks and answers, each refusal as the client's typed exception."""

import io

import numpy as np
import pytest
from service_kit import auth, make_token, through_test_client

import tileforge
from compiler.pipeline import compile_model
from server.db.models import Artifact, Job, JobStatus, RunJob
from server.db.session import one_off_transaction
from server.storage import LocalStorage


@pytest.fixture
def artifact(api, onnx_models, tmp_path):
    """(token, artifact id, compile job id) of a succeeded compilation of the MLP x[4,16] -> y[4,8]
    (built here with the real compiler, as a worker would)."""
    token = make_token(api.settings, "alice")
    data = onnx_models.mlp(seed=91)
    model = api.post("/v1/models", files={"file": ("m.onnx", data)}, headers=auth(token)).json()
    job = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=auth(token)).json()
    built = compile_model(data, "cpu", {"validate": False}, output=tmp_path / "a.tar.gz")
    with built.artifact_path.open("rb") as f:
        blob = LocalStorage(api.settings.storage_root).put(f)
    with one_off_transaction(api.settings.db_url) as s:
        s.get(Job, job["id"]).status = JobStatus.succeeded
        row = Artifact(tenant_id=s.get(Job, job["id"]).tenant_id, job_id=job["id"], sha256=blob.sha256,
                       size=blob.size, report=built.report)
        s.add(row)
        s.flush()
        return token, row.id, job["id"]


def _client(api, token: str) -> tileforge.Client:
    return tileforge.Client("http://testserver", token, transport=through_test_client(api), retries=0)


def _npz(**arrays) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def test_a_profile_is_queued_on_the_artifacts_model_and_target(api, artifact):
    token, artifact_id, job_id = artifact
    r = api.post("/v1/profiles", json={"artifact_id": artifact_id, "runs": 7, "threads": 2}, headers=auth(token))
    assert r.status_code == 202, r.text
    profile = r.json()
    assert (profile["kind"], profile["status"], profile["artifact_id"], profile["target"], profile["result"]) == \
        ("profile", "queued", artifact_id, "cpu", None)
    assert profile["options"] == {"runs": 7, "threads": 2}
    assert api.get(f"/v1/profiles/{profile['id']}", headers=auth(token)).json()["id"] == profile["id"]
    # a profile is not a compilation, nor an inference, and compilations list only compilations
    assert api.get(f"/v1/compilations/{profile['id']}", headers=auth(token)).status_code == 404
    assert api.get(f"/v1/inferences/{profile['id']}", headers=auth(token)).status_code == 404
    listed = api.get("/v1/compilations", headers=auth(token)).json()["items"]
    assert [j["id"] for j in listed] == [job_id]


def test_a_retried_profile_submission_makes_one_job(api, artifact):
    token, artifact_id, _ = artifact
    headers = auth(token) | {"Idempotency-Key": "p-1"}
    first = api.post("/v1/profiles", json={"artifact_id": artifact_id}, headers=headers).json()
    again = api.post("/v1/profiles", json={"artifact_id": artifact_id}, headers=headers).json()
    assert first["id"] == again["id"]


def test_an_inference_without_outputs_yet_is_a_conflict(api, artifact):
    token, artifact_id, _ = artifact
    with _client(api, token) as client:
        job = client.submit_inference(artifact_id, {"x": np.zeros((4, 16), np.float32)})
        assert (job.data["status"], job.data["outputs_url"]) == ("queued", None)
        with pytest.raises(tileforge.Conflict, match=f"inference '{job.id}' is queued; it has no outputs") as e:
            client._t.request("GET", f"/v1/inferences/{job.id}/outputs")
        assert e.value.status == 409


@pytest.mark.parametrize(("arrays", "problem"), [
    ({"x": np.zeros((4, 16), np.float16)}, "input 'x' has dtype float16, but the artifact takes float32"),
    ({"x": np.zeros((4, 16), np.float32), "y": np.zeros(1)}, "inputs hold 'y', which the artifact does not take"),
    ({"x": np.array([None], dtype=object)}, "input 'x' holds Python objects"),
])
def test_inputs_that_do_not_fit_the_artifact_are_422_naming_the_mismatch(api, artifact, arrays, problem):
    token, artifact_id, _ = artifact
    r = api.post("/v1/inferences", data={"artifact_id": artifact_id},
                 files={"inputs": ("i.npz", _npz(**arrays))}, headers=auth(token))
    assert r.status_code == 422 and problem in r.json()["detail"], r.text


def test_inputs_over_the_limit_are_413_naming_the_setting(api, artifact):
    token, artifact_id, _ = artifact
    api.app.state.settings.max_inference_bytes = 100  # the route's exact check on the file part
    r = api.post("/v1/inferences", data={"artifact_id": artifact_id},
                 files={"inputs": ("i.npz", _npz(x=np.zeros((4, 16), np.float32)))}, headers=auth(token))
    assert r.status_code == 413 and "TILEFORGE_MAX_INFERENCE_BYTES" in r.json()["detail"]


def test_another_tenants_artifact_is_not_found(api, artifact):
    _, artifact_id, _ = artifact
    bob = make_token(api.settings, "bob")
    with _client(api, bob) as client, pytest.raises(tileforge.NotFound, match=r"artifact .* not found"):
        client.profile(artifact_id)
    r = api.post("/v1/inferences", data={"artifact_id": artifact_id},
                 files={"inputs": ("i.npz", _npz(x=np.zeros((4, 16), np.float32)))}, headers=auth(bob))
    assert r.status_code == 404


def test_the_openapi_schema_documents_the_new_routes(api):
    paths = api.get("/openapi.json").json()["paths"]
    assert {"/v1/profiles", "/v1/profiles/{job_id}", "/v1/inferences", "/v1/inferences/{job_id}",
            "/v1/inferences/{job_id}/outputs"} <= set(paths)
    assert {"404", "409", "413", "422"} <= set(paths["/v1/inferences"]["post"]["responses"])
    assert "application/octet-stream" in paths["/v1/inferences/{job_id}/outputs"]["get"]["responses"]["200"]["content"]



def test_deleting_the_model_deletes_its_inferences_and_their_inputs(api, artifact):
    token, artifact_id, _ = artifact
    job = api.post("/v1/inferences", data={"artifact_id": artifact_id},
                   files={"inputs": ("i.npz", _npz(x=np.ones((4, 16), np.float32)))}, headers=auth(token)).json()
    model_id = job["model_id"]
    r = api.delete(f"/v1/models/{model_id}", headers=auth(token))
    assert r.status_code == 409 and "1 queued or running job(s)" in r.json()["detail"]  # the inference
    with one_off_transaction(api.settings.db_url) as s:
        s.get(Job, job["id"]).status = JobStatus.cancelled
        inputs = s.get(RunJob, job["id"]).inputs_sha256
    storage = LocalStorage(api.settings.storage_root)
    assert storage.exists(inputs)
    assert api.delete(f"/v1/models/{model_id}", headers=auth(token)).status_code == 204
    assert not storage.exists(inputs)
    assert api.get(f"/v1/inferences/{job['id']}", headers=auth(token)).status_code == 404
