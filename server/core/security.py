"""API tokens: random, shown once, stored only as a sha256; each with a scope (`write`, or
`read`: nothing that changes state) and an optional expiry. A token is resolved on every
request, so a revocation or an expiry holds from the next request on."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from server.core.scopes import READ, SCOPES, WRITE
from server.db.models import Tenant, Token
from server.db.types import utcnow

TOKEN_PREFIX = "tf_"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# `last_used_at` is written at most this often per token: a write per request would make
# every read a database write.
LAST_USE_RESOLUTION = timedelta(minutes=1)


def hash_token(token: str) -> str:
    """What the database keeps of a token (tokens are 256-bit random, so a plain sha256 suffices)."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, tenant_name: str, scope: str = WRITE,
                 expires_in: timedelta | None = None) -> str:
    """A new token for the tenant called `tenant_name` (created if new); returns the token itself."""
    if scope not in SCOPES:
        raise ValueError(f"unknown token scope {scope!r}; known: {', '.join(SCOPES)}")
    tenant = session.scalar(select(Tenant).where(Tenant.name == tenant_name))
    if tenant is None:
        tenant = Tenant(name=tenant_name)
        session.add(tenant)
        session.flush()
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires_at = None if expires_in is None else utcnow() + expires_in
    session.add(Token(tenant_id=tenant.id, token_hash=hash_token(token), scope=scope, expires_at=expires_at))
    return token


@dataclass(frozen=True)
class Grant:
    """What a live token grants: its tenant, and its scope."""

    tenant: Tenant
    token_id: str
    scope: str

    def refusal(self, method: str) -> str | None:
        """Why this token may not make a `method` request, or None when it may."""
        if self.scope == READ and method.upper() not in SAFE_METHODS:
            return f"this token's scope is '{READ}': a {method.upper()} request needs a '{WRITE}' token"
        return None


def resolve_token(session: Session, token: str) -> Grant | None:
    """The grant of a live token (not revoked, not expired), or None; records its use in
    the session's transaction (see `authenticate`)."""
    now = utcnow()
    row = session.execute(select(Tenant, Token).join(Token, Token.tenant_id == Tenant.id)
                          .where(Token.token_hash == hash_token(token), Token.revoked.is_(False),
                                 or_(Token.expires_at.is_(None), Token.expires_at > now))).first()
    if row is None:
        return None
    tenant, tok = row
    if tok.last_used_at is None or now - tok.last_used_at >= LAST_USE_RESOLUTION:
        session.execute(update(Token).where(Token.id == tok.id).values(last_used_at=now))
    return Grant(tenant, tok.id, tok.scope)


def authenticate(session: Session, token: str) -> Grant | None:
    """`resolve_token` for a request's session, committing the recorded use at once (the
    request has written nothing else yet)."""
    grant = resolve_token(session, token)
    if session.in_transaction():
        session.commit()
    return grant


MISSING_TOKEN = "missing bearer token: send 'Authorization: Bearer <token>'"
INVALID_TOKEN = "invalid, expired or revoked token"


def bearer_grant(session: Session, authorization: str | None) -> Grant | str:
    """The grant of an `Authorization: Bearer <token>` header, or what is wrong with it."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return MISSING_TOKEN
    return authenticate(session, token.strip()) or INVALID_TOKEN
