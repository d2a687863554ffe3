"""The /v1 API router, and the errors every one of its operations may answer (documented in
the OpenAPI schema with the body they really have, `{"detail": "..."}`)."""

from fastapi import APIRouter

from server.api.routes import (
    artifacts,
    compilations,
    inferences,
    kernels,
    models,
    profiles,
    targets,
)
from server.api.schemas import ErrorOut


def _error(description: str) -> dict:
    return {"model": ErrorOut, "description": description}


ERRORS = {
    400: _error("a malformed request"),
    401: _error("no bearer token, or one that is invalid, expired or revoked"),
    403: _error("the token's scope forbids it (a read-only token), or a tenant quota is reached (named)"),
    404: _error("no such object for this tenant"),
    409: _error("the object's state forbids it (a finished job, a model with active jobs, "
                "an inference without outputs yet)"),
    413: _error("the upload is larger than the limit, or than the tenant's stored-bytes quota"),
    422: _error("invalid input, named: a field, a model the compiler refuses, an unknown target, "
                "an inference input of the wrong name, shape or dtype"),
    429: _error("the tenant's request rate is over its limit; retry after `Retry-After` seconds"),
    503: _error("the database or the broker is unreachable; retry after `Retry-After` seconds"),
    507: _error("the blob store is full: nothing was stored"),
}

api_router = APIRouter(prefix="/v1", responses=ERRORS)
for module in (models, compilations, artifacts, profiles, inferences, kernels, targets):
    api_router.include_router(module.router)
