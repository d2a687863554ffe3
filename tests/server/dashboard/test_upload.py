"""The upload form: it stores the model and queues a compilation through the API's own code."""

import onnx
from onnx import TensorProto, helper
from sqlalchemy import select

from server.db.models import Job, JobStatus, Model


def matmul_relu(input_name: str = "x", tail_op: str = "Relu", node_name: str = "relu") -> bytes:
    """A 1x4 @ 4x3 MatMul followed by an element-wise op (Relu)."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], [0.5] * 12)
    graph = helper.make_graph(
        [helper.make_node("MatMul", [input_name, "w"], ["h"], name="mm"),
         helper.make_node(tail_op, ["h"], ["y"], name=node_name)],
        "g", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_upload_form_stores_the_model_and_queues_a_job(alice, seeded, dashboard_app):
    r = alice.post("/models", files={"file": ("tiny.onnx", matmul_relu(), "application/octet-stream")},
                   data={"target": "cpu"})
    assert r.status_code == 303 and r.headers["location"].startswith("/jobs/")
    job_id = r.headers["location"].removeprefix("/jobs/")
    with dashboard_app.state.sessions() as s:
        job = s.get(Job, job_id)
        model = s.get(Model, job.model_id)
        assert job.tenant_id == seeded.tenant_ids["alice"] and job.status == JobStatus.queued
        assert job.target == "cpu" and model.filename == "tiny.onnx"
        assert model.op_histogram == {"MatMul": 1, "Relu": 1}
    page = alice.get(r.headers["location"]).text
    assert f'data-events="/jobs/{job_id}/events"' in page and "queued" in page


def test_upload_form_names_the_problem_with_a_bad_model(alice, dashboard_app):
    r = alice.post("/models", files={"file": ("junk.onnx", b"not an onnx model", "application/octet-stream")},
                   data={"target": "cpu"})
    assert r.status_code == 422
    assert 'id="form-error"' in r.text
    with dashboard_app.state.sessions() as s:
        assert s.scalars(select(Model).where(Model.filename == "junk.onnx")).first() is None


def test_upload_form_refuses_an_unknown_target(alice):
    r = alice.post("/models", files={"file": ("t.onnx", matmul_relu(), "application/octet-stream")},
                   data={"target": "quantum:9000"})
    assert r.status_code == 422 and "unknown target" in r.text


def test_compile_again_from_the_model_page(alice, seeded):
    r = alice.post(f"/models/{seeded.models['alice']}/compile", data={"target": "cpu"})
    assert r.status_code == 303 and r.headers["location"].startswith("/jobs/")
    assert alice.post(f"/models/{seeded.models['bob']}/compile", data={"target": "cpu"}).status_code == 404


def test_model_page_escapes_a_script_node_name(alice, dashboard_app):
    model = onnx.load_from_string(matmul_relu(input_name="<script>alert(1)</script>"))
    r = alice.post("/models", files={"file": ("<b>bold</b>.onnx", model.SerializeToString(), "application/octet-stream")},
                   data={"target": "cpu"})
    assert r.status_code == 303
    html = alice.get("/models").text
    assert "&lt;b&gt;bold&lt;/b&gt;.onnx" in html and "<b>bold</b>" not in html
    with dashboard_app.state.sessions() as s:
        model_id = s.scalars(select(Model.id).where(Model.filename == "<b>bold</b>.onnx")).one()
    detail = alice.get(f"/models/{model_id}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail and "<script>alert(1)" not in detail


def test_a_refused_model_names_its_script_node_as_text(alice):
    data = matmul_relu(tail_op="NoSuchOp", node_name="<script>alert(1)</script>")
    r = alice.post("/models", files={"file": ("bad.onnx", data, "application/octet-stream")}, data={"target": "cpu"})
    assert r.status_code == 422
    assert "NoSuchOp (node &#39;&lt;script&gt;alert(1)&lt;/script&gt;&#39;)" in r.text
    assert "<script>alert(1)" not in r.text


def test_upload_form_applies_the_upload_limit(alice, dashboard_app):
    dashboard_app.state.settings.max_upload_bytes = 100
    declared_too_big = alice.post("/models", files={"file": ("big.onnx", b"\0" * 200_000)}, data={"target": "cpu"})
    assert declared_too_big.status_code == 413 and "upload limit of 100 bytes" in declared_too_big.text
    stored_too_big = alice.post("/models", files={"file": ("big.onnx", b"\0" * 1000)}, data={"target": "cpu"})
    assert stored_too_big.status_code == 413 and "upload limit of 100 bytes" in stored_too_big.text


def test_upload_form_without_a_file_says_so(alice):
    r = alice.post("/models", data={"target": "cpu"})
    assert r.status_code == 422 and "choose an ONNX file" in r.text
