"""An API app on the embedded default, and on PostgreSQL + Redis (rate limits shared
through Redis there) when they are reachable."""

from __future__ import annotations

import secrets

import pytest
from service_kit import create_database, migrated


@pytest.fixture(params=["embedded", pytest.param("postgres+redis", marks=pytest.mark.services)])
def service_settings(request: pytest.FixtureRequest, embedded_settings):
    """Settings of a fresh, migrated service database: the embedded default, or a new
    PostgreSQL database with the session's Redis."""
    if request.param == "embedded":
        return embedded_settings
    url = migrated(create_database(request.getfixturevalue("postgres_url"), secrets.token_hex(3)))
    return embedded_settings.model_copy(update={"database_url": url,
                                                "redis_url": request.getfixturevalue("redis_url")})


@pytest.fixture
def tenant_api(service_settings):
    """A TestClient on an app with `service_settings` (no worker); `.settings` holds them."""
    from fastapi.testclient import TestClient

    from server.main import create_app

    with TestClient(create_app(service_settings), follow_redirects=False) as client:
        client.settings = service_settings
        yield client
