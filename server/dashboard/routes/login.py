"""Log in with an API token; log out."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from server.api.deps import SessionDep
from server.core.security import authenticate
from server.dashboard.auth import SameOriginDep, login_cookie, logout_cookie, safe_next
from server.dashboard.templating import render

router = APIRouter()


@router.get("/login")
def login_form(request: Request, next: str = "/") -> Response:
    """The login form."""
    return render(request, "login.html", tenant=None, next=safe_next(next), error=None)


@router.post("/login", dependencies=[SameOriginDep])
def login(request: Request, session: SessionDep, token: Annotated[str, Form()] = "",
          next: Annotated[str, Form()] = "/") -> Response:
    """Check the token with the API's own verification and keep it in the login cookie."""
    token = token.strip()
    if not token or authenticate(session, token) is None:
        return render(request, "login.html", status_code=401, tenant=None, next=safe_next(next),
                      error="That token is not valid (unknown, expired or revoked).")
    response = RedirectResponse(safe_next(next), status_code=303)
    login_cookie(response, token, request)
    return response


@router.post("/logout", dependencies=[SameOriginDep])
def logout() -> Response:
    """Forget the login cookie."""
    response = RedirectResponse("/login", status_code=303)
    logout_cookie(response)
    return response
