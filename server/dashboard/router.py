"""All dashboard pages on one router (left out of the OpenAPI schema: they are HTML, not API)."""

from fastapi import APIRouter

from server.dashboard.routes import jobs, kernels, login, models, profiles, static

router = APIRouter(include_in_schema=False)
for module in (login, static, kernels, jobs, models, profiles):
    router.include_router(module.router)
