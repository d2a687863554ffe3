"""`tileforge db upgrade` and `tileforge token create` from a shell, honouring the environment."""

import os
import subprocess
import sys

from fastapi.testclient import TestClient

from server.core.config import Settings
from server.main import create_app


def _tileforge(home, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    return subprocess.run([sys.executable, "-m", "server.cli", *args], env=env | {"TILEFORGE_HOME": str(home)},
                          capture_output=True, text=True, timeout=120, check=False)


def test_token_from_the_shell_works_against_the_server(tmp_path):
    home = tmp_path / "home"
    made = _tileforge(home, "token", "create", "--tenant", "carol")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert made.stdout == token + "\n" and token.startswith("tf_")  # only the token
    assert _tileforge(home, "db", "upgrade").returncode == 0
    with TestClient(create_app(Settings(home=home))) as client:
        assert client.get("/v1/models", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_the_compiler_commands_are_there_too():
    from server.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert {"compile", "run", "bench", "targets", "serve", "worker", "db", "token"} <= set(commands)
