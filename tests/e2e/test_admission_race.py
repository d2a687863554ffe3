"""Concurrent submissions against a live API: the tenant's active-jobs quota and its
dispatch window are decided one submission at a time (server/jobs/fairness.py's tenant
lock), so simultaneous requests never pass either by one."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from service_kit import FAST_JOB_SETTINGS, auth, make_token, migrated
from sqlalchemy import func, select

from server.db.models import Job
from server.db.session import one_off_transaction
from server.services.quotas import set_limits

pytestmark = pytest.mark.slow
SUBMISSIONS = 16


@pytest.fixture(params=["embedded", pytest.param("postgres+redis", marks=pytest.mark.services)])
def racing_settings(request, module_tmp):
    from server.core.config import Settings

    update = {"tenant_dispatch_window": 2, "db_pool_size": SUBMISSIONS, "api_threads": SUBMISSIONS}
    if request.param == "embedded":
        settings = Settings(home=module_tmp / f"home-{secrets.token_hex(3)}", **FAST_JOB_SETTINGS)
        migrated(settings.db_url)
        return settings.model_copy(update=update)
    return request.getfixturevalue("pg_redis_settings").model_copy(update=update)


def _fire(url: str, token: str, model_id: str) -> list[int]:
    """SUBMISSIONS submissions of one model at once, from as many threads; their statuses."""
    def submit(_: int) -> int:
        return httpx.post(f"{url}/v1/compilations", headers=auth(token), timeout=60,
                          json={"model_id": model_id, "target": "cpu"}).status_code

    with ThreadPoolExecutor(SUBMISSIONS) as pool:
        return list(pool.map(submit, range(SUBMISSIONS)))


def _count(settings, tenant_name: str, **where) -> int:
    from server.db.models import Tenant

    with one_off_transaction(settings.db_url) as s:
        tenant = s.scalar(select(Tenant.id).where(Tenant.name == tenant_name))
        return s.scalar(select(func.count()).select_from(Job).filter_by(tenant_id=tenant, **where))


def test_concurrent_submissions_respect_the_window_and_the_quota(racing_settings, start_server, onnx_models):
    url = start_server(racing_settings)  # no worker: every job stays queued
    tenant = f"race{secrets.token_hex(3)}"
    token = make_token(racing_settings, tenant)
    model = httpx.post(f"{url}/v1/models", headers=auth(token), files={"file": ("m.onnx", onnx_models.mlp(seed=65))},
                       timeout=60).json()["id"]

    statuses = _fire(url, token, model)
    assert statuses == [202] * SUBMISSIONS
    # The window is 2: exactly 2 jobs went to the broker, the rest are held.
    assert _count(racing_settings, tenant, held=False) == 2
    assert _count(racing_settings, tenant, held=True) == SUBMISSIONS - 2

    with one_off_transaction(racing_settings.db_url) as s:
        set_limits(s, tenant, max_active_jobs=SUBMISSIONS + 5)
    statuses = _fire(url, token, model)
    assert sorted(statuses) == [202] * 5 + [403] * (SUBMISSIONS - 5)
    assert _count(racing_settings, tenant) == SUBMISSIONS + 5
