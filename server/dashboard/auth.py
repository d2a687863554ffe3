"""Dashboard login: the API token, checked by the service's own verification, kept in a cookie.

The cookie is HttpOnly (page scripts cannot read the token) and SameSite=Strict
(other sites' pages cannot make the browser send it), and Secure when served over
HTTPS. Pages resolve the tenant from it on every request, so a revoked or expired
token logs the browser out at once.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, urlsplit

from fastapi import Depends, HTTPException, Request, Response

from server.api.deps import SessionDep, SettingsDep, admit
from server.core.security import authenticate
from server.db.models import Tenant

COOKIE_NAME = "tileforge_token"
COOKIE_MAX_AGE = 7 * 24 * 3600


def login_cookie(response: Response, token: str, request: Request) -> None:
    """Store `token` in the login cookie on `response`."""
    response.set_cookie(COOKIE_NAME, token, max_age=COOKIE_MAX_AGE, path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")


def logout_cookie(response: Response) -> None:
    """Remove the login cookie."""
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")


def safe_next(path: str | None) -> str:
    """A local path to go to after logging in; anything else (another site) becomes `/`."""
    if not path:
        return "/"
    parts = urlsplit(path)
    if parts.scheme or parts.netloc or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path


def cookie_tenant(request: Request, session: SessionDep, settings: SettingsDep) -> Tenant:
    """The tenant of the login cookie's token; otherwise a redirect to the login page (403
    for a form a read-only token may not send). Pages count against the tenant's request
    rate like API calls (429 with `Retry-After` over it)."""
    token = request.cookies.get(COOKIE_NAME)
    grant = authenticate(session, token) if token else None
    if grant is None:
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        # A 303 with Location: the browser goes to the login form and comes back here.
        raise HTTPException(303, "log in first", headers={"Location": f"/login?next={quote(here)}"})
    return admit(request, session, settings, grant)


def same_origin(request: Request) -> None:
    """Refuse a form POST sent from another site's page (defence in depth beside SameSite)."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.url.netloc:
        raise HTTPException(403, "cross-site form submission refused")


CookieTenantDep = Annotated[Tenant, Depends(cookie_tenant)]
SameOriginDep = Depends(same_origin)
