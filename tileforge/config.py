"""Where the client finds its server and token: arguments first, then TILEFORGE_URL /
TILEFORGE_TOKEN, then the file `tileforge login URL` writes ($XDG_CONFIG_HOME/tileforge/
config.json, or ~/.config/tileforge/config.json), readable by its owner only."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tileforge.errors import ClientError


@dataclass(frozen=True)
class Credentials:
    """A server URL and the bearer token for it (None: only public endpoints)."""

    url: str
    token: str | None


def config_path() -> Path:
    """The config file's path (it need not exist)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tileforge" / "config.json"


def read_config() -> dict[str, str]:
    """The saved login, or {} when there is none."""
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ClientError(f"cannot read {path}: {e}; run `tileforge login URL` again") from None
    return {k: v for k, v in data.items() if k in ("url", "token") and isinstance(v, str)} \
        if isinstance(data, dict) else {}


def save_config(url: str, token: str | None) -> Path:
    """Write the login with mode 0600 (it holds a secret), replacing any earlier one."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT: tighten it
    with os.fdopen(fd, "w") as f:
        json.dump({"url": normalize_url(url)} | ({"token": token} if token else {}), f)
    return path


def resolve(url: str | None = None, token: str | None = None) -> Credentials:
    """The URL and token to use: the arguments, else the environment, else the saved login
    (whose token is sent only to the server it was saved for)."""
    url = url or os.environ.get("TILEFORGE_URL")
    token = token or os.environ.get("TILEFORGE_TOKEN")
    if not url or not token:
        saved = read_config()
        url = url or saved.get("url")
        if not url:
            raise ClientError("no server URL: pass url=, set TILEFORGE_URL, or run `tileforge login URL`")
        if not token and saved.get("url", "").rstrip("/") == normalize_url(url):
            token = saved.get("token")
    return Credentials(normalize_url(url), token)


def normalize_url(url: str) -> str:
    """`url` without a trailing slash; only http(s) URLs are accepted."""
    if not url.startswith(("http://", "https://")):
        raise ClientError(f"server URL must start with http:// or https://, not {url[:80]!r}")
    return url.rstrip("/")
