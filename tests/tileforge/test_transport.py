"""Retries and typed errors against a real HTTP server on a socket (stdlib http.server)
scripted to answer what the tileforge server answers rarely or never in a test: 429,
503 with Retry-After, a dropped connection, 403, 500."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tileforge.errors import AuthError, ServerError, TooManyRequests, Unreachable
from tileforge.transport import Transport


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next (status, headers) of `script`; None drops the connection."""

    def __init__(self, script):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.seen = list(script), []


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self._answer()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer()

    def _answer(self):
        self.server.seen.append((self.command, self.headers.get("Idempotency-Key")))
        step = self.server.script.pop(0) if self.server.script else (200, {})
        if step is None:
            self.connection.shutdown(socket.SHUT_RDWR)  # the answer is lost on the way
            return
        status, headers = step
        body = json.dumps({"detail": f"scripted {status}"} if status >= 400 else {"ok": True}).encode()
        self.send_response(status)
        for k, v in (headers | {"Content-Type": "application/json", "Content-Length": str(len(body))}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(script):
        server = Scripted(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, Transport(f"http://127.0.0.1:{server.server_port}", "tf_t", retries=3, backoff=0.01)

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_429_waits_for_retry_after_then_succeeds(serve):
    server, t = serve([(429, {"Retry-After": "0.3"})])
    start = time.monotonic()
    assert t.request("GET", "/v1/x").json() == {"ok": True}
    assert time.monotonic() - start >= 0.3 and len(server.seen) == 2


def test_retries_are_bounded_and_the_last_answer_is_raised_typed(serve):
    server, t = serve([(503, {"Retry-After": "0"})] * 10)
    with pytest.raises(ServerError, match=r"scripted 503 \(HTTP 503\)") as e:
        t.request("GET", "/v1/x")
    assert (e.value.status, e.value.retry_after, len(server.seen)) == (503, 0.0, 4)
    server, t = serve([(429, {"Retry-After": "0"})] * 10)
    with pytest.raises(TooManyRequests) as e:
        t.request("GET", "/v1/x")
    assert e.value.status == 429


def test_other_errors_are_raised_at_once(serve):
    server, t = serve([(403, {}), (500, {})])
    with pytest.raises(AuthError, match="scripted 403"):
        t.request("GET", "/v1/x")
    with pytest.raises(ServerError, match="scripted 500"):
        t.request("GET", "/v1/x")
    assert len(server.seen) == 2


def test_a_lost_answer_is_retried_with_the_same_idempotency_key(serve):
    server, t = serve([None, (202, {})])
    assert t.request("POST", "/v1/compilations", json={}, idempotency_key="k-42").json() == {"ok": True}
    assert server.seen == [("POST", "k-42"), ("POST", "k-42")]


def test_an_unreachable_server_is_named_after_the_retries():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    t = Transport(f"http://127.0.0.1:{port}", None, retries=2, backoff=0.01)
    with pytest.raises(Unreachable, match=f"cannot reach http://127.0.0.1:{port}.*ConnectError"):
        t.request("GET", "/v1/targets")
