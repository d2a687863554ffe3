"""An API request's log lines carry its tenant, and the job it is about, as JSON fields."""

from __future__ import annotations

import io
import json
import logging

from service_kit import auth, make_token

from server.core.logging_setup import context_handler


def test_request_log_lines_carry_tenant_and_job(tenant_api, onnx_models):
    stream = io.StringIO()
    handler = context_handler("json", stream)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        headers = auth(make_token(tenant_api.settings, "lou"))
        model = tenant_api.post("/v1/models", headers=headers, files={"file": ("m.onnx", onnx_models.mlp(seed=63))})
        job = tenant_api.post("/v1/compilations", headers=headers,
                              json={"model_id": model.json()["id"], "target": "cpu"}).json()["id"]
        assert tenant_api.post(f"/v1/compilations/{job}/cancel", headers=headers).status_code == 202
        logging.getLogger("outside").info("no request")
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    sent = [x for x in lines if " sent to queue " in x["message"]]
    assert sent and all((x["tenant"], x["job_id"]) == ("lou", job) for x in sent)
    cancel = [x for x in lines if x["message"] == f"job {job}: cancel requested"]
    assert [(x["tenant"], x["job_id"]) for x in cancel] == [("lou", job)]  # from the path's job id
    assert [(x["tenant"], x["job_id"]) for x in lines if x["message"] == "no request"] == [("-", "-")]
