"""`tileforge serve --with-worker` started for a script (scripts/embedded_throughput.py,
scripts/loadtest.py): a free port, the environment it runs in, and waiting for it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TERMINAL = ("succeeded", "failed", "cancelled")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def served(env: dict[str, str], log: Path, serve_args: tuple[str, ...] = ()) -> Iterator[str]:
    """`tileforge serve --with-worker` on a free port with `env` (output in `log`); yields its
    URL once it answers, and stops it (SIGTERM stops its worker too)."""
    port = free_port()
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--with-worker", "--port", str(port), *serve_args],
            cwd=ROOT, env=os.environ | env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not healthy(url) or b" ready." not in log.read_bytes():  # the API and its worker
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the service did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
