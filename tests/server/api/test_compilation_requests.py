"""Submissions: several targets in one request, and `Idempotency-Key` (a retried request
returns the first one's jobs; a key reused for another request is refused)."""

from service_kit import auth, make_token


def _setup(api, onnx_models, seed: int = 0):
    token = make_token(api.settings, "alice")
    model = api.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp(seed=seed))},
                     headers=auth(token)).json()
    return auth(token), model


def _jobs_of(api, headers, model_id: str) -> list[str]:
    return [j["id"] for j in api.get("/v1/compilations", params={"model_id": model_id},
                                     headers=headers).json()["items"]]


def test_targets_make_one_job_each_sharing_the_upload(api, onnx_models):
    headers, model = _setup(api, onnx_models)
    r = api.post("/v1/compilations", json={"model_id": model["id"], "targets": ["cpu", "cuda:h100"],
                                           "options": {"threads": 1}}, headers=headers)
    assert r.status_code == 202, r.text
    jobs = r.json()
    assert [j["target"] for j in jobs] == ["cpu", "cuda:h100"]
    assert {j["model_id"] for j in jobs} == {model["id"]} and all(j["status"] == "queued" for j in jobs)
    assert all(j["options"] == {"threads": 1} for j in jobs)
    assert sorted(_jobs_of(api, headers, model["id"])) == sorted(j["id"] for j in jobs)


def test_bad_target_lists_are_refused_naming_the_problem(api, onnx_models):
    headers, model = _setup(api, onnx_models)
    cases = [({"targets": []}, "targets"), ({"targets": ["cpu", "cpu"]}, "more than once: cpu"),
             ({"target": "cpu", "targets": ["cpu"]}, "not both"), ({"targets": ["cpu", "tpu9"]}, "tpu9")]
    for extra, words in cases:
        r = api.post("/v1/compilations", json={"model_id": model["id"], **extra}, headers=headers)
        assert r.status_code == 422 and words in r.json()["detail"], (extra, r.text)
    assert _jobs_of(api, headers, model["id"]) == []  # an unknown target among good ones makes no job


def test_a_repeated_idempotency_key_returns_the_same_jobs(api, onnx_models):
    headers, model = _setup(api, onnx_models)
    body = {"model_id": model["id"], "targets": ["cpu", "cuda:a100"]}
    first = api.post("/v1/compilations", json=body, headers=headers | {"Idempotency-Key": "k-1"})
    again = api.post("/v1/compilations", json=body, headers=headers | {"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 202
    assert [j["id"] for j in again.json()] == [j["id"] for j in first.json()]
    assert len(_jobs_of(api, headers, model["id"])) == 2
    other = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=headers | {"Idempotency-Key": "k-1"})
    assert other.status_code == 422 and "different request" in other.json()["detail"]
    fresh = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=headers | {"Idempotency-Key": "k-2"})
    assert fresh.status_code == 202 and len(_jobs_of(api, headers, model["id"])) == 3


def test_keys_are_per_tenant_and_go_with_their_model(api, onnx_models):
    headers, model = _setup(api, onnx_models)
    body = {"model_id": model["id"]}
    job = api.post("/v1/compilations", json=body, headers=headers | {"Idempotency-Key": "shared"}).json()
    bob = auth(make_token(api.settings, "bob"))
    bobs_model = api.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp())}, headers=bob).json()
    bobs = api.post("/v1/compilations", json={"model_id": bobs_model["id"]},
                    headers=bob | {"Idempotency-Key": "shared"})
    assert bobs.status_code == 202 and bobs.json()["id"] != job["id"]
    api.post(f"/v1/compilations/{job['id']}/cancel", headers=headers)
    assert api.delete(f"/v1/models/{model['id']}", headers=headers).status_code == 204
    model = api.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp())}, headers=headers).json()
    again = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=headers | {"Idempotency-Key": "shared"})
    assert again.status_code == 202 and again.json()["id"] != job["id"]  # the key went with the model


def test_an_overlong_key_is_refused(api, onnx_models):
    headers, model = _setup(api, onnx_models)
    r = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=headers | {"Idempotency-Key": "k" * 256})
    assert r.status_code == 422 and "Idempotency-Key" in r.json()["detail"], r.text


def test_openapi_documents_targets_and_the_key(api):
    op = api.get("/openapi.json").json()["paths"]["/v1/compilations"]["post"]
    assert [p["name"] for p in op["parameters"]] == ["Idempotency-Key"]
    answer = op["responses"]["202"]["content"]["application/json"]["schema"]["anyOf"]
    assert {"$ref": "#/components/schemas/CompilationOut"} in answer
    assert {"type": "array", "items": {"$ref": "#/components/schemas/CompilationOut"}} in answer
