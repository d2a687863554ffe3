"""The token `tileforge serve` prints for its local tenant, reused across starts.

Tokens are stored hashed, so the one serve hands out is kept in plain text in
`TILEFORGE_HOME/local-token`, readable by its owner only (0600). That folder already
holds the embedded database and the artifacts, so the file exposes nothing its reader
could not already take; a deployment runs `serve --no-token` and creates tokens with
`tileforge token create` instead. A kept token that was revoked, has expired, or belongs
to another tenant is replaced by a new one.
"""

from __future__ import annotations

import os
from pathlib import Path

from server.core.config import Settings
from server.core.security import create_token, resolve_token
from server.db.session import one_off_transaction

FILE_NAME = "local-token"


def local_token_path(settings: Settings) -> Path:
    """Where serve keeps its local tenant's token."""
    return settings.home / FILE_NAME


def local_token(settings: Settings, tenant: str) -> str:
    """The kept token of `tenant` when it still works, else a new one (then kept)."""
    path = local_token_path(settings)
    kept = path.read_text().strip() if path.is_file() else ""
    with one_off_transaction(settings.db_url) as s:
        grant = resolve_token(s, kept) if kept else None
        if grant is not None and grant.tenant.name == tenant:
            return kept
        token = create_token(s, tenant)
    _write_private(path, token)
    return token


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner may read, atomically (no moment at a wider mode)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, path)
