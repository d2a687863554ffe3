"""Helpers shared by the service tests (imported as `service_kit`; fixtures live in conftest.py)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


PG_ADMIN_URL = os.environ.get("TILEFORGE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


REDIS_SERVER = os.environ.get("TILEFORGE_TEST_REDIS", "redis://127.0.0.1:6379")


FAST_JOB_SETTINGS = {
    "job_lease_seconds": 3.0,
    "reaper_interval_seconds": 1.0,
    # Test modules share one PostgreSQL database: a short republish delay would let one
    # module's reaper send another's waiting jobs to its own queues (the broker-loss test
    # sets its own).
    "job_republish_seconds": 3600.0,
    "sse_poll_seconds": 0.1,
    "job_max_attempts": 3,
}


# The upload limits of the client's end-to-end service (tests/e2e/conftest.py).
UPLOAD_LIMIT = 64 * 1024
INFERENCE_LIMIT = 16 * 1024


@dataclass
class ClientService:
    """A live service for the client library: its URL and a token of tenant `alice`."""

    url: str
    token: str

    def client(self, **kwargs):
        import tileforge

        return tileforge.Client(self.url, self.token, **kwargs)


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A TCP port nothing listens on now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def migrated(url: str) -> str:
    """`url` after `alembic upgrade head`."""
    from server.db.migrate import upgrade

    upgrade(url)
    return url


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_token(settings, tenant: str) -> str:
    """A new token for `tenant` in the (migrated) database of `settings`."""
    from server.core.security import create_token
    from server.db.session import one_off_transaction

    with one_off_transaction(settings.db_url) as s:
        return create_token(s, tenant)


@dataclass
class WorkerProcess:
    """A real `tileforge worker` (celery worker) subprocess."""

    process: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the worker and its pool children at once (a machine dying)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def create_database(base_url: str, suffix: str) -> str:
    from sqlalchemy import create_engine, text

    name = f"{base_url.rsplit('/', 1)[1]}_{suffix}"
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base_url.rsplit("/", 1)[0] + f"/{name}"


class OnnxModels:
    """Small ONNX models built in code for the service tests."""

    @staticmethod
    def mlp(seed: int = 0, hidden: int = 16, tail: str = "MatMul", out: int = 8) -> bytes:
        """x[4,16] -> MatMul(16x`hidden`) -> Relu -> `tail` (MatMul to `out` wide, or an element-wise op)."""
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper

        rng = np.random.default_rng(seed)
        inits = [numpy_helper.from_array(rng.standard_normal((16, hidden)).astype(np.float32), "w1")]
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"])]
        if tail == "MatMul":
            inits.append(numpy_helper.from_array(rng.standard_normal((hidden, out)).astype(np.float32), "w2"))
            nodes.append(helper.make_node("MatMul", ["r", "w2"], ["y"]))
            out_shape = [4, out]
        else:
            nodes.append(helper.make_node(tail, ["r"], ["y"]))
            out_shape = [4, hidden]
        graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()

    @staticmethod
    def with_op(op: str) -> bytes:
        """A one-node model of `op` over x[2,3] (for refusals of unsupported ops)."""
        from onnx import TensorProto, helper

        graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "one",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()

    @staticmethod
    def relu_chain(nodes: int) -> bytes:
        """x[4,8] -> Relu -> Relu -> ... (`nodes` of them): a graph as deep as it is long,
        for caps and for passes that must not recurse over the graph."""
        from onnx import TensorProto, helper

        names = ["x", *(f"t{i}" for i in range(1, nodes)), "y"]
        graph = helper.make_graph([helper.make_node("Relu", [a], [b]) for a, b in itertools.pairwise(names)], "chain",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()

    @staticmethod
    def deep(layers: int = 24, batch: int = 8) -> bytes:
        """`layers` of MatMul + Tanh, each layer a different (in, out) width pair: as many
        distinct kernels to build as layers, so compiling takes a while (gcc, per kernel)
        on any machine: time to act mid-job, and with ~100 layers far over a 1 s time
        limit. Weights scaled by 1/sqrt(in), so the network stays well conditioned at
        any depth (a deep random tanh net with larger weights is chaotic: rounding
        differences grow layer by layer and no two correct runtimes agree). A test that
        acts mid-build on the session's shared PostgreSQL takes a `batch` no other test
        compiles: its kernels (and onnxruntime's recorded answers) are then not in that
        kernel cache already, where a job would finish before it is seen building."""
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper

        rng = np.random.default_rng(7)
        widths, pairs = [16], set()
        while len(widths) <= layers:
            w = int(rng.integers(16, 64))
            if (widths[-1], w) not in pairs:
                pairs.add((widths[-1], w))
                widths.append(w)
        nodes, inits, x = [], [], "x"
        for i, (prev, width) in enumerate(itertools.pairwise(widths)):
            w = rng.standard_normal((prev, width)) / np.sqrt(prev)
            inits.append(numpy_helper.from_array(w.astype(np.float32), f"w{i}"))
            nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]), helper.make_node("Tanh", [f"h{i}"], [f"a{i}"])]
            x = f"a{i}"
        graph = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
                                  [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, widths[-1]])], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()


class ServiceFlow:
    """The user's path through the API: upload, compile, watch, download, run."""

    TERMINAL = ("succeeded", "failed", "cancelled")

    def __init__(self, client, token: str) -> None:
        self.client, self.headers = client, auth(token)

    def upload(self, data: bytes) -> dict:
        r = self.client.post("/v1/models", files={"file": ("model.onnx", data)}, headers=self.headers)
        assert r.status_code in (200, 201), r.text
        return r.json()

    def submit(self, model_id: str, target: str = "cpu", options: dict | None = None) -> dict:
        r = self.client.post("/v1/compilations", json={"model_id": model_id, "target": target,
                                                       "options": options or {}}, headers=self.headers)
        assert r.status_code == 202, r.text
        return r.json()

    def job(self, job_id: str) -> dict:
        return self.client.get(f"/v1/compilations/{job_id}", headers=self.headers).json()

    def wait(self, job_id: str, timeout: float = 180, until=None) -> dict:
        """Poll until the job ends (or `until(job)` holds)."""
        until = until or (lambda j: j["status"] in self.TERMINAL)
        deadline = time.monotonic() + timeout
        while not until(job := self.job(job_id)):
            assert time.monotonic() < deadline, f"job still {job['status']} after {timeout}s: {job}"
            time.sleep(0.05)
        return job

    def events(self, job_id: str) -> list[dict]:
        """Every `status` event of the job's SSE stream, until it ends."""
        import json

        out = []
        with self.client.stream("GET", f"/v1/compilations/{job_id}/events", headers=self.headers) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("data: ") and '"id"' in line:
                    out.append(json.loads(line[len("data: "):]))
        return out

    def download(self, job: dict, folder: Path) -> Path:
        """The job's artifact, checked against the sha256 header."""
        import hashlib

        r = self.client.get(f"/v1/artifacts/{job['artifact_id']}", headers=self.headers)
        assert r.status_code == 200, r.text
        assert r.headers["X-Artifact-SHA256"] == hashlib.sha256(r.content).hexdigest() == job["artifact_sha256"]
        path = folder / f"{job['artifact_id']}.tar.gz"
        path.write_bytes(r.content)
        return path

    @staticmethod
    def assert_runs_like_onnxruntime(artifact: Path, model: bytes, seed: int = 0) -> None:
        """compiler.runtime.load(artifact).run(x) matches onnxruntime on random inputs."""
        import numpy as np
        import onnxruntime as ort

        from compiler.runtime import load

        session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(seed)
        feeds = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
                 for i in session.get_inputs()}
        expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))
        got = load(artifact).run(feeds)
        assert set(got) == set(expected)
        for name, want in expected.items():
            np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-4)


def loaded_modules(statement: str, roots: tuple[str, ...] = ("compiler", "server", "worker")) -> list[str]:
    """The modules under `roots` (by default `compiler`, `server` and `worker`) a fresh
    interpreter holds after `statement`."""
    code = (f"import json, sys\n{statement}\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    return json.loads(out.splitlines()[-1])


@contextmanager
def live_api(settings, log: Path) -> Iterator[str]:
    """A real uvicorn serving the app for `settings` on a free port; yields its base URL
    once /healthz answers, and stops it (its output in `log`)."""
    import urllib.request

    port = free_port()
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "server.main:create_app", "--factory", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, env=os.environ | settings.to_env(), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"uvicorn did not start:\n{log.read_text(errors='replace')[-3000:]}") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()


def through_test_client(test_client):
    """An httpx transport that sends each request through `test_client` (a Starlette
    TestClient) by its public API: the client library speaks httpx, while TestClient's own
    transport is httpx2's where that is installed (the bench extra's huggingface_hub brings it)."""
    import httpx

    class Transport(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            answer = test_client.request(request.method, str(request.url), headers=dict(request.headers),
                                         content=request.read())
            return httpx.Response(answer.status_code, headers=list(answer.headers.multi_items()),
                                  content=answer.content, request=request)

    return Transport()


def run_job_in_process(settings, job_id: str) -> str:
    """One attempt at a queued job in this process with the real pipeline (what a worker's
    task runs), on the database of `settings`; returns its outcome."""
    from server.db.session import make_engine, make_sessionmaker
    from server.storage import LocalStorage
    from worker.context import WorkerContext
    from worker.kernel_cache import DatabaseKernelCache
    from worker.runner import run_job

    engine = make_engine(settings.db_url)
    sessions = make_sessionmaker(engine)
    try:
        ctx = WorkerContext(settings, sessions, LocalStorage(settings.storage_root), DatabaseKernelCache(sessions))
        return run_job(ctx, job_id, "in-process", f"task-{job_id}")
    finally:
        engine.dispose()
