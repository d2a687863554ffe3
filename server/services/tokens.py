"""Token administration (the `tileforge token` commands): list tokens without their
secrets, revoke one. Creating one is server/core/security.py's `create_token`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from server.db.models import Tenant, Token
from server.services.errors import ServiceError


def list_tokens(session: Session, tenant_name: str | None = None) -> Sequence[tuple[Token, str]]:
    """Every token (or one tenant's) with its tenant's name, oldest first; only metadata is
    kept, so no secret can be shown."""
    query = select(Token, Tenant.name).join(Tenant, Tenant.id == Token.tenant_id)
    if tenant_name is not None:
        query = query.where(Tenant.name == tenant_name)
    return [(token, name) for token, name in session.execute(query.order_by(Token.created_at, Token.id))]


def revoke_token(session: Session, token_id: str) -> bool:
    """Revoke a token by id (it stops working on the next request); False when it already was."""
    token = session.get(Token, token_id)
    if token is None:
        raise ServiceError(404, f"token {token_id[:80]!r} not found (see `tileforge token list`)")
    return session.execute(update(Token).where(Token.id == token_id, Token.revoked.is_(False))
                           .values(revoked=True)).rowcount == 1
