"""API tokens: random, shown once, stored only as a sha256."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.db.models import Tenant, Token

TOKEN_PREFIX = "tf_"


def hash_token(token: str) -> str:
    """What the database keeps of a token (tokens are 256-bit random, so a plain sha256 suffices)."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, tenant_name: str) -> str:
    """A new token for the tenant called `tenant_name` (created if new); returns the token itself."""
    tenant = session.scalar(select(Tenant).where(Tenant.name == tenant_name))
    if tenant is None:
        tenant = Tenant(name=tenant_name)
        session.add(tenant)
        session.flush()
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(Token(tenant_id=tenant.id, token_hash=hash_token(token)))
    return token


def tenant_of_token(session: Session, token: str) -> Tenant | None:
    """The tenant a live token belongs to, or None."""
    return session.scalar(select(Tenant).join(Token, Token.tenant_id == Tenant.id)
                          .where(Token.token_hash == hash_token(token), Token.revoked.is_(False)))


MISSING_TOKEN = "missing bearer token: send 'Authorization: Bearer <token>'"
INVALID_TOKEN = "invalid or revoked token"


def bearer_tenant(session: Session, authorization: str | None) -> Tenant | str:
    """The tenant of an `Authorization: Bearer <token>` header, or what is wrong with it."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return MISSING_TOKEN
    return tenant_of_token(session, token.strip()) or INVALID_TOKEN
