"""The /v1 API router."""

from fastapi import APIRouter

from server.api.routes import artifacts, compilations, kernels, models, targets

api_router = APIRouter(prefix="/v1")
for module in (models, compilations, artifacts, kernels, targets):
    api_router.include_router(module.router)
