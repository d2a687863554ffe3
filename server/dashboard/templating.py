"""The Jinja environment: templates from server/templates, autoescape always on."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from server.dashboard.formatting import FILTERS
from server.dashboard.highlight import highlight
from server.db.kernel_namespace import namespace_label

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


def _environment() -> Environment:
    # autoescape=True for every template, whatever its file name: a model-derived
    # string (node, tensor or file name) is always text, never markup.
    env = Environment(loader=FileSystemLoader(TEMPLATE_DIR), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(FILTERS)
    env.filters["highlight"] = highlight
    env.filters["namespace"] = namespace_label
    return env


templates = Jinja2Templates(env=_environment())


# Scripts, styles and images come from this app only: nothing from a CDN, no inline script.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


def render(request: Request, name: str, status_code: int = 200, **context: object) -> HTMLResponse:
    """Render template `name` with `context` (plus the request) as an HTML page."""
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"
    return response


def not_found_page(request: Request, tenant: object, nav: str, what: str, ident: str) -> HTMLResponse:
    """The 404 page for a `what` (job, model, ...) `ident` the tenant has not got."""
    return render(request, "not_found.html", status_code=404, tenant=tenant, nav=nav, what=what, ident=ident)


def url_with(request: Request, **changes: object) -> str:
    """This page's URL with some query parameters changed (None or "" removes one).

    Any change other than `page` itself goes back to page 1.
    """
    params = dict(request.query_params)
    if "page" not in changes:
        params.pop("page", None)
    for name, value in changes.items():
        if value is None or value == "":
            params.pop(name, None)
        else:
            params[name] = str(value)
    query = urlencode(params)
    return request.url.path + (f"?{query}" if query else "")


templates.env.globals["url_with"] = url_with
