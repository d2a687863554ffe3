"""The OpenAPI schema describes the errors as they are: every /v1 operation documents the
error statuses it can answer, each with the body the app really sends ({"detail": str},
not FastAPI's default validation array), and real error responses fit it."""

from service_kit import auth


def _operations(spec: dict):
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if path.startswith("/v1/"):
                yield path, method, op


def test_every_operation_documents_its_errors_with_the_real_body(api):
    spec = api.get("/openapi.json").json()
    assert "HTTPValidationError" not in str(spec)
    error = {"$ref": "#/components/schemas/ErrorOut"}
    assert spec["components"]["schemas"]["ErrorOut"]["required"] == ["detail"]
    for path, method, op in _operations(spec):
        for status in ("401", "404", "422", "503"):
            assert op["responses"][status]["content"]["application/json"]["schema"] == error, (method, path, status)


def test_real_error_responses_are_documented_for_their_operation(api, onnx_models):
    spec = api.get("/openapi.json").json()
    cases = [
        ("get", "/v1/models", "/v1/models", {}),  # no token: 401
        ("get", "/v1/compilations/{job_id}", "/v1/compilations/nope", {"token": True}),  # 404
        ("post", "/v1/compilations", "/v1/compilations", {"token": True, "json": {"model_id": 3}}),  # 422
        ("get", "/v1/kernels", "/v1/kernels?limit=0", {"token": True}),  # 422
    ]
    from service_kit import make_token

    token = make_token(api.settings, "alice")
    for method, template, url, how in cases:
        headers = auth(token) if how.get("token") else {}
        r = api.request(method.upper(), url, headers=headers, json=how.get("json"))
        assert r.status_code >= 400
        assert str(r.status_code) in spec["paths"][template][method]["responses"], (url, r.status_code)
        body = r.json()
        assert set(body) == {"detail"} and isinstance(body["detail"], str), body


def test_a_405_allows_every_method_the_schema_documents_for_the_path(api):
    spec = api.get("/openapi.json").json()
    for url, template in (("/v1/models", "/v1/models"), ("/v1/models/m1", "/v1/models/{model_id}")):
        r = api.request("PATCH", url)
        assert r.status_code == 405
        assert r.headers["Allow"] == ", ".join(sorted(m.upper() for m in spec["paths"][template])), url
