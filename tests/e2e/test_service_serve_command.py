"""`tileforge serve --with-worker` as `make serve` runs it: a fresh home, migrated, the API on
a real port with a worker subprocess; the printed token works; stopping it stops the worker."""

import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest
from service_kit import ROOT, ServiceFlow, free_port

pytestmark = pytest.mark.slow


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_serve_with_worker_compiles_and_stops_cleanly(tmp_path, onnx_models):
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "CELERY_RESULT_BACKEND")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        serve = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "--with-worker", "--port", str(port)],
                                 cwd=ROOT, env=env | {"TILEFORGE_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"},
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not re.search(r"celery@\S+ ready\.", text := log.read_text(errors="replace")):
            assert serve.poll() is None and time.monotonic() < deadline, text[-3000:]
            time.sleep(0.3)
        assert f"http://127.0.0.1:{port}" in text
        token = re.search(r"token for tenant 'local': (tf_\S+)", text).group(1)
        assert (tmp_path / "home" / "tileforge.sqlite").exists()

        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            flow = ServiceFlow(client, token)
            data = onnx_models.mlp(seed=51)
            done = flow.wait(flow.submit(flow.upload(data)["id"])["id"], timeout=120)
            assert done["status"] == "succeeded", done["error"]
            flow.assert_runs_like_onnxruntime(flow.download(done, tmp_path), data)
    finally:
        serve.send_signal(signal.SIGTERM)  # what `docker stop`, systemd and `timeout` send
        try:
            serve.wait(timeout=40)
        finally:
            leftover = _group_alive(serve.pid)
            if leftover:
                os.killpg(serve.pid, signal.SIGKILL)
    assert not leftover, "the worker outlived `tileforge serve`"
