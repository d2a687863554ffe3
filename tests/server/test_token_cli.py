"""`tileforge token create|list|revoke`, `tileforge tenant limits` from a shell, and the
token `serve` keeps for its local tenant."""

import os
import stat
import subprocess
import sys

from fastapi.testclient import TestClient

from server.core.config import Settings
from server.db.migrate import upgrade
from server.db.session import one_off_transaction
from server.local_token import local_token, local_token_path
from server.main import create_app
from server.services.tokens import list_tokens, revoke_token


def _tileforge(home, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    return subprocess.run([sys.executable, "-m", "server.cli", *args], env=env | {"TILEFORGE_HOME": str(home)},
                          capture_output=True, text=True, timeout=120, check=False)


def test_list_shows_tokens_without_secrets_and_revoke_takes_effect(tmp_path):
    home = tmp_path / "home"
    reader = _tileforge(home, "token", "create", "--tenant", "lea", "--scope", "read", "--expires-in", "30d")
    writer = _tileforge(home, "token", "create", "--tenant", "max")
    assert reader.returncode == 0 and writer.returncode == 0, reader.stderr + writer.stderr
    listed = _tileforge(home, "token", "list")
    assert listed.returncode == 0, listed.stderr
    assert reader.stdout.strip() not in listed.stdout and writer.stdout.strip() not in listed.stdout
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["ID", "TENANT", "CREATED", "LAST", "USED", "EXPIRES", "SCOPE", "REVOKED"]
    lea = next(r.split() for r in rows if " lea " in r)
    assert lea[-2:] == ["read", "no"] and lea[1] == "lea"
    assert [r.split()[1] for r in _tileforge(home, "token", "list", "--tenant", "max").stdout.splitlines()[1:]] == ["max"]

    token = writer.stdout.strip()
    max_id = next(r.split()[0] for r in rows if " max " in r)
    with TestClient(create_app(Settings(home=home))) as client:
        assert client.get("/v1/models", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        revoked = _tileforge(home, "token", "revoke", max_id)
        assert revoked.returncode == 0 and "revoked" in revoked.stdout
        assert client.get("/v1/models", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert _tileforge(home, "token", "list", "--tenant", "max").stdout.split()[-1] == "yes"


def test_bad_admin_input_is_one_line(tmp_path):
    home = tmp_path / "home"
    for args, words in ((("token", "revoke", "nope"), "not found"),
                        (("token", "create", "--tenant", "x", "--expires-in", "soon"), "not a duration"),
                        (("tenant", "limits", "nobody"), "tenant 'nobody' not found"),
                        (("tenant", "limits", "x", "--max-models", "0"), "not a positive whole number")):
        r = _tileforge(home, *args)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_tenant_limits_are_shown_and_overridden(tmp_path):
    home = tmp_path / "home"
    assert _tileforge(home, "token", "create", "--tenant", "ned").returncode == 0
    r = _tileforge(home, "tenant", "limits", "ned", "--max-models", "7", "--private-kernels", "yes")
    assert r.returncode == 0, r.stderr
    assert "max_models: 7" in r.stdout and "private_kernels: True" in r.stdout
    assert "max_active_jobs: 200" in r.stdout  # the setting's default
    r = _tileforge(home, "tenant", "limits", "ned", "--max-models", "default")
    assert "max_models: 1000" in r.stdout and "private_kernels: True" in r.stdout


def test_serve_keeps_one_local_token_in_an_owner_only_file(tmp_path):
    settings = Settings(home=tmp_path / "home")
    settings.home.mkdir()
    upgrade(settings.db_url)
    first = local_token(settings, "local")
    assert local_token(settings, "local") == first  # the next start reuses it
    path = local_token_path(settings)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == first
    with one_off_transaction(settings.db_url) as s:
        assert len(list_tokens(s, "local")) == 1  # no new permanent token per start
        revoke_token(s, list_tokens(s, "local")[0][0].id)
    replaced = local_token(settings, "local")
    assert replaced != first and path.read_text().strip() == replaced
    assert local_token(settings, "other") != replaced  # a token of another tenant is not reused
