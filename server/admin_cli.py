"""`tileforge token create|list|revoke` and `tileforge tenant limits`: administration run
against the service's database (the same settings as the server's)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import datetime, timedelta

# the settings and the database layer are imported by the commands that use them: every
# `tileforge` command builds this parser, and `compile` should not wait for SQLAlchemy
from server.core.scopes import SCOPES, WRITE

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def duration(text: str) -> timedelta:
    """`30d`, `12h`, `45m`, `90s` or `2w` as a timedelta (argparse type: a clear error otherwise)."""
    match = re.fullmatch(r"\s*(\d{1,9})\s*([smhdw])\s*", text)
    if match is None or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30d, 12h, 45m, 90s or 2w")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def limit_value(text: str) -> int | None:
    """A positive limit, or `default` (None: the setting's default applies again)."""
    if text == "default":
        return None
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number or 'default'")
    return int(text)


def _in_database(work: Callable) -> object:
    """`work(session)` in one transaction on the migrated database of the settings."""
    from server.core.config import get_settings
    from server.db.migrate import upgrade
    from server.db.session import one_off_transaction

    settings = get_settings()
    upgrade(settings.db_url)  # a fresh embedded home has no tables yet
    with one_off_transaction(settings.db_url) as s:
        return work(s)


def _refused(e: Exception) -> int:
    print(f"error: {getattr(e, 'detail', e)}", file=sys.stderr)
    return 2


def cmd_token_create(a: argparse.Namespace) -> int:
    from server.core.security import create_token

    print(_in_database(lambda s: create_token(s, a.tenant, a.scope, a.expires_in)))
    return 0


def _when(t: datetime | None) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S")


def cmd_token_list(a: argparse.Namespace) -> int:
    from server.services.tokens import list_tokens

    def rows(s) -> list[tuple[str, ...]]:
        return [(t.id, name, _when(t.created_at), _when(t.last_used_at), _when(t.expires_at), t.scope,
                 "yes" if t.revoked else "no") for t, name in list_tokens(s, a.tenant)]

    table = [("ID", "TENANT", "CREATED", "LAST USED", "EXPIRES", "SCOPE", "REVOKED"), *_in_database(rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return 0


def cmd_token_revoke(a: argparse.Namespace) -> int:
    from server.services.errors import ServiceError
    from server.services.tokens import revoke_token

    try:
        changed = _in_database(lambda s: revoke_token(s, a.id))
    except ServiceError as e:
        return _refused(e)
    print(f"token {a.id} revoked" if changed else f"token {a.id} was already revoked")
    return 0


LIMIT_OPTIONS = ("max_stored_bytes", "max_models", "max_active_jobs", "requests_per_minute")


def cmd_tenant_limits(a: argparse.Namespace) -> int:
    from server.services.errors import ServiceError
    from server.services.quotas import limits_of, set_limits

    overrides = {name: getattr(a, name) for name in LIMIT_OPTIONS if hasattr(a, name)}
    if a.private_kernels is not None:
        overrides["private_kernels"] = a.private_kernels == "yes"

    def apply(s) -> object:
        row = set_limits(s, a.tenant, **overrides)
        s.flush()
        from server.core.config import get_settings

        return limits_of(s, row.tenant_id, get_settings())

    try:
        limits = _in_database(apply)
    except ServiceError as e:
        return _refused(e)
    for name, value in vars(limits).items():
        print(f"{name}: {value}")
    return 0


def add_admin_commands(sub: argparse._SubParsersAction) -> None:
    """Register `token create|list|revoke` and `tenant limits`."""
    token = sub.add_parser("token", help="API tokens").add_subparsers(dest="token_command", required=True)
    p = token.add_parser("create", help="create a token for a tenant and print it (only the token)")
    p.add_argument("--tenant", required=True)
    p.add_argument("--expires-in", type=duration, help="lifetime such as 30d, 12h or 2w (default: none)")
    p.add_argument("--scope", choices=SCOPES, default=WRITE, help="read: may not change anything")
    p.set_defaults(func=cmd_token_create)
    p = token.add_parser("list", help="list tokens (never their secrets)")
    p.add_argument("--tenant", help="only this tenant's")
    p.set_defaults(func=cmd_token_list)
    p = token.add_parser("revoke", help="revoke a token by id (from `token list`); takes effect at once")
    p.add_argument("id")
    p.set_defaults(func=cmd_token_revoke)

    tenant = sub.add_parser("tenant", help="tenants").add_subparsers(dest="tenant_command", required=True)
    p = tenant.add_parser("limits", help="show a tenant's limits, overriding those given ('default' resets one)")
    p.add_argument("tenant")
    for name in LIMIT_OPTIONS:
        p.add_argument(f"--{name.replace('_', '-')}", type=limit_value, default=argparse.SUPPRESS,
                       metavar="N|default")
    p.add_argument("--private-kernels", choices=("yes", "no"),
                   help="keep the tenant's kernels in a private namespace (yes) or the shared cache (no)")
    p.set_defaults(func=cmd_tenant_limits)
