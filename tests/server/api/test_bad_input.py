"""Bad input: each a 4xx whose message names the problem, and nothing changes in the
database or the storage folder."""

import pytest
from service_kit import auth, make_token
from sqlalchemy import func, select

from server.db.models import Base
from server.db.session import make_engine


def _snapshot(settings) -> tuple:
    engine = make_engine(settings.db_url)
    with engine.connect() as c:
        counts = {t.name: c.scalar(select(func.count()).select_from(t)) for t in Base.metadata.sorted_tables}
    engine.dispose()
    files = sorted(p.name for p in settings.storage_root.rglob("*") if p.is_file())
    return counts, files


@pytest.fixture
def alice(api, onnx_models):
    token = make_token(api.settings, "alice")
    model = api.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp())}, headers=auth(token)).json()
    return token, model


def _refused(api, status: int, *words: str, **request) -> None:
    before = _snapshot(api.settings)
    r = api.request(**request)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "Traceback" not in detail
    for w in words:
        assert w.lower() in detail.lower(), detail
    assert _snapshot(api.settings) == before


def test_non_onnx_bytes(api, alice):
    _refused(api, 422, "not an ONNX model", method="POST", url="/v1/models",
             files={"file": ("x.onnx", b"this is not a model")}, headers=auth(alice[0]))


def test_truncated_model(api, alice, onnx_models):
    data = onnx_models.mlp(seed=3)
    _refused(api, 422, "truncated", method="POST", url="/v1/models",
             files={"file": ("x.onnx", data[: len(data) // 2])}, headers=auth(alice[0]))


def test_unsupported_op(api, alice, onnx_models):
    _refused(api, 422, "NonMaxSuppression", method="POST", url="/v1/models",
             files={"file": ("x.onnx", onnx_models.with_op("NonMaxSuppression"))}, headers=auth(alice[0]))


def test_oversized_upload(api, alice, onnx_models):
    api.app.state.settings.max_upload_bytes = 100  # the route's exact check on the file part
    _refused(api, 413, "limit of 100 bytes", method="POST", url="/v1/models",
             files={"file": ("x.onnx", onnx_models.mlp(seed=4))}, headers=auth(alice[0]))


def test_model_over_the_node_cap_names_its_count_and_the_setting(api, alice, onnx_models):
    api.app.state.settings.max_model_nodes = 50
    _refused(api, 422, "51 nodes", "limit of 50", "TILEFORGE_MAX_MODEL_NODES", method="POST", url="/v1/models",
             files={"file": ("x.onnx", onnx_models.relu_chain(51))}, headers=auth(alice[0]))
    r = api.post("/v1/models", files={"file": ("x.onnx", onnx_models.relu_chain(50))}, headers=auth(alice[0]))
    assert r.status_code == 201, r.text


def test_oversized_body_is_refused_before_it_is_read(embedded_settings, onnx_models):
    from fastapi.testclient import TestClient

    from server.main import create_app

    embedded_settings.max_upload_bytes = 1000
    token = make_token(embedded_settings, "alice")
    with TestClient(create_app(embedded_settings)) as client:
        client.settings = embedded_settings
        _refused(client, 413, "limit of 1000 bytes", method="POST", url="/v1/models",
                 files={"file": ("x.onnx", b"\0" * 200_000)}, headers=auth(token))

        def chunks():  # no Content-Length: counted as it streams
            for _ in range(100):
                yield b"\0" * 4096

        _refused(client, 413, "limit of 1000 bytes", method="POST", url="/v1/models", content=chunks(),
                 headers=auth(token) | {"Content-Type": "multipart/form-data; boundary=xyz"})


def test_unknown_target(api, alice):
    _refused(api, 422, "tpu-v9", method="POST", url="/v1/compilations",
             json={"model_id": alice[1]["id"], "target": "tpu-v9"}, headers=auth(alice[0]))


def test_unknown_option(api, alice):
    _refused(api, 422, "unroll_everything", method="POST", url="/v1/compilations",
             json={"model_id": alice[1]["id"], "options": {"unroll_everything": True}}, headers=auth(alice[0]))


def test_malformed_request_body_names_the_field(api, alice):
    _refused(api, 422, "model_id", method="POST", url="/v1/compilations", json={"target": "cpu"},
             headers=auth(alice[0]))
    _refused(api, 422, "not valid JSON", method="POST", url="/v1/compilations", content=b"{oops",
             headers=auth(alice[0]) | {"Content-Type": "application/json"})


@pytest.mark.parametrize("request_", [
    {"method": "GET", "url": "/v1/models"},
    {"method": "POST", "url": "/v1/compilations", "json": {"model_id": "x"}},
    {"method": "GET", "url": "/v1/kernels"},
    {"method": "GET", "url": "/v1/artifacts/abc"},
])
def test_missing_or_bad_token(api, alice, request_):
    _refused(api, 401, "bearer token", **request_)
    _refused(api, 401, "invalid", **request_, headers=auth("tf_not-a-real-token"))


def test_another_tenants_ids_are_not_found(api, alice, onnx_models):
    token, model = alice
    job = api.post("/v1/compilations", json={"model_id": model["id"]}, headers=auth(token)).json()
    mallory = auth(make_token(api.settings, "mallory"))
    for method, url, body in [
        ("GET", f"/v1/models/{model['id']}", None),
        ("DELETE", f"/v1/models/{model['id']}", None),
        ("POST", "/v1/compilations", {"model_id": model["id"]}),
        ("GET", f"/v1/compilations/{job['id']}", None),
        ("GET", f"/v1/compilations/{job['id']}/events", None),
        ("POST", f"/v1/compilations/{job['id']}/cancel", None),
    ]:
        _refused(api, 404, "not found", method=method, url=url, json=body, headers=mallory)
    assert api.get("/v1/models", headers=mallory).json()["total"] == 0
    assert api.get("/v1/compilations", headers=mallory).json()["total"] == 0


@pytest.mark.parametrize("path", ["/v1/models", "/v1/compilations", "/v1/kernels"])
def test_an_offset_past_64_bits_is_a_422_not_a_500(api, alice, path):
    token, _ = alice
    _refused(api, 422, "offset", method="GET", url=f"{path}?offset=18446744073709551617",
             headers=auth(token))


def _one_node(node, x_shape, weight) -> bytes:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph([node], "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(weight), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.mark.parametrize(("case", "words"), [
    ("matmul", ("MatMul", "inner dimensions differ")),
    ("gather", ("Gather", "index 7 is out of range")),
    ("conv", ("negative dimension",)),
])
def test_a_model_the_compiler_would_refuse_is_refused_at_upload(api, alice, case, words):
    import numpy as np
    from onnx import helper

    models = {
        "matmul": _one_node(helper.make_node("MatMul", ["x", "w"], ["y"]), [2, 3], np.ones((4, 5), np.float32)),
        "gather": _one_node(helper.make_node("Gather", ["x", "w"], ["y"], axis=0), [3, 4], np.array([0, 7])),
        "conv": _one_node(helper.make_node("Conv", ["x", "w"], ["y"]), [1, 1, 3, 3], np.ones((1, 1, 5, 5), np.float32)),
    }
    _refused(api, 422, *words, method="POST", url="/v1/models",
             files={"file": ("bad.onnx", models[case])}, headers=auth(alice[0]))


def test_an_upload_without_a_live_token_is_refused_before_its_body_is_read(api, alice):
    read = []

    def body():  # a large streamed body: none of it may be taken before the 401
        for _ in range(64):
            read.append(1)
            yield b"\0" * (1 << 16)

    for headers, words in [({}, ("bearer token",)), (auth("tf_not-a-real-token"), ("invalid",))]:
        _refused(api, 401, *words, method="POST", url="/v1/models", content=body(),
                 headers=headers | {"Content-Type": "multipart/form-data; boundary=xyz"})
    assert read == []


def test_a_database_outage_is_a_503_with_retry_after_not_a_500(api, alice):
    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker

    from server.api.connection_gate import ConnectionGate

    token, _ = alice
    working = api.app.state.gate
    # nothing listens on port 1: every query fails to connect, as during a restart
    api.app.state.gate = ConnectionGate(sessionmaker(create_engine("postgresql+psycopg://tf@127.0.0.1:1/gone",
                                                                   connect_args={"connect_timeout": 2})), 2)
    try:
        for method, url in [("GET", "/v1/models"), ("GET", "/v1/kernels"), ("POST", "/v1/compilations")]:
            r = api.request(method, url, headers=auth(token), json={"model_id": "x"} if method == "POST" else None)
            assert r.status_code == 503, r.text
            assert r.headers["Retry-After"] == "5" and "database is unreachable" in r.json()["detail"]
    finally:
        api.app.state.gate = working
    assert api.get("/v1/models", headers=auth(token)).status_code == 200  # back by itself
