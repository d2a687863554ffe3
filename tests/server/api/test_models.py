"""Model uploads: checked, described, content-addressed, per tenant."""

from service_kit import auth, make_token


def test_upload_describes_the_model_and_dedups(api, onnx_models):
    token = make_token(api.settings, "alice")
    data = onnx_models.mlp()
    r = api.post("/v1/models", files={"file": ("mlp.onnx", data)}, headers=auth(token))
    assert r.status_code == 201, r.text
    model = r.json()
    assert model["inputs"] == [{"name": "x", "shape": [4, 16], "dtype": "float32"}]
    assert model["outputs"][0]["shape"] == [4, 8]
    assert model["op_histogram"] == {"MatMul": 2, "Relu": 1}
    assert model["parameters"] == 16 * 16 + 16 * 8 and model["size"] == len(data)
    again = api.post("/v1/models", files={"file": ("other-name.onnx", data)}, headers=auth(token))
    assert again.status_code == 200 and again.json()["id"] == model["id"]
    listed = api.get("/v1/models", headers=auth(token)).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == model["id"]
    assert api.get(f"/v1/models/{model['id']}", headers=auth(token)).json() == model


def test_same_bytes_from_two_tenants_are_two_models(api, onnx_models):
    data = onnx_models.mlp()
    a = api.post("/v1/models", files={"file": ("m.onnx", data)}, headers=auth(make_token(api.settings, "a")))
    b = api.post("/v1/models", files={"file": ("m.onnx", data)}, headers=auth(make_token(api.settings, "b")))
    assert a.status_code == b.status_code == 201
    assert a.json()["id"] != b.json()["id"] and a.json()["sha256"] == b.json()["sha256"]


def test_delete_removes_the_model_and_its_unshared_bytes(api, onnx_models):
    ta, tb = make_token(api.settings, "a"), make_token(api.settings, "b")
    data = onnx_models.mlp()
    ma = api.post("/v1/models", files={"file": ("m.onnx", data)}, headers=auth(ta)).json()
    mb = api.post("/v1/models", files={"file": ("m.onnx", data)}, headers=auth(tb)).json()
    blob = api.settings.storage_root / ma["sha256"][:2] / ma["sha256"]
    assert api.delete(f"/v1/models/{ma['id']}", headers=auth(ta)).status_code == 204
    assert api.get(f"/v1/models/{ma['id']}", headers=auth(ta)).status_code == 404
    assert blob.exists()  # tenant b still has these bytes
    assert api.delete(f"/v1/models/{mb['id']}", headers=auth(tb)).status_code == 204
    assert not blob.exists()


def test_model_with_active_compilation_cannot_be_deleted(api, onnx_models):
    token = make_token(api.settings, "a")
    model = api.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp())}, headers=auth(token)).json()
    job = api.post("/v1/compilations", json={"model_id": model["id"], "target": "cpu"}, headers=auth(token))
    assert job.status_code == 202, job.text
    r = api.delete(f"/v1/models/{model['id']}", headers=auth(token))
    assert r.status_code == 409 and "cancel them first" in r.json()["detail"]
    assert api.post(f"/v1/compilations/{job.json()['id']}/cancel", headers=auth(token)).status_code == 202
    assert api.delete(f"/v1/models/{model['id']}", headers=auth(token)).status_code == 204
    assert api.get(f"/v1/compilations/{job.json()['id']}", headers=auth(token)).status_code == 404


def test_pin_and_unpin_a_model(api, onnx_models):
    alice, bob = make_token(api.settings, "alice"), make_token(api.settings, "bob")
    model = api.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp())}, headers=auth(alice)).json()
    assert model["pinned"] is False
    pinned = api.post(f"/v1/models/{model['id']}/pin", headers=auth(alice))
    assert pinned.status_code == 200 and pinned.json()["pinned"] is True
    assert api.get(f"/v1/models/{model['id']}", headers=auth(alice)).json()["pinned"] is True
    assert api.post(f"/v1/models/{model['id']}/pin", headers=auth(bob)).status_code == 404  # not bob's
    assert api.post(f"/v1/models/{model['id']}/unpin", headers=auth(alice)).json()["pinned"] is False
