"""The `Allow` header of a 405: every method the OpenAPI schema documents for the path.

Starlette names the methods of one route only, the first whose path matched, so a path
served by two endpoints (GET and POST /v1/models) announced half of what it answers to,
against its own schema.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.requests import Request
from starlette.routing import compile_path

HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})


def allowed_methods(request: Request) -> str | None:
    """The documented methods of every path template the request's path matches,
    comma-separated; None where the schema documents none (a dashboard page)."""
    app: FastAPI = request.app
    methods: set[str] = set()
    for template, item in app.openapi()["paths"].items():
        regex, _, _ = compile_path(template)
        if regex.match(request.url.path):
            methods |= {m.upper() for m in item if m in HTTP_METHODS}
    return ", ".join(sorted(methods)) or None
