"""schemathesis against the live API (a real uvicorn on the embedded default, a valid
token): every check it has (`--checks all`), a fixed seed and a bounded number of examples
per operation, so the run is the same each time and stays well under a minute. It passes
only with no server error, no response outside its schema and no undocumented status.
Per-operation expectations, and the id of a model the test uploads first (so operations on
a model reach their logic rather than a 404), live in schemathesis.toml beside this file."""

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from service_kit import ROOT, auth, make_token, migrated

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED, MAX_EXAMPLES = 18, 10


def test_schemathesis_finds_nothing(module_tmp, start_server, onnx_models, tmp_path):
    from server.core.config import Settings

    # The run sends a few thousand requests: the rate limit is not what is under test here.
    settings = Settings(home=module_tmp / "home", tenant_requests_per_minute=1_000_000)
    migrated(settings.db_url)
    url = start_server(settings)
    token = make_token(settings, "alice")
    with httpx.Client(base_url=url, headers=auth(token)) as client:
        model = client.post("/v1/models", files={"file": ("m.onnx", onnx_models.mlp())}).json()
    r = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "--no-color",
         "run", f"{url}/openapi.json", "--checks", "all", "--seed", str(SEED),
         "--max-examples", str(MAX_EXAMPLES), "--header", f"Authorization: Bearer {token}",
         "--report", "junit", "--report-junit-path", str(tmp_path / "schemathesis.xml")],
        cwd=ROOT, env=os.environ | {"TILEFORGE_FUZZ_MODEL_ID": model["id"]}, capture_output=True, text=True,
        timeout=240)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "Tested: " in r.stdout and " failures" not in r.stdout, r.stdout[-6000:]
