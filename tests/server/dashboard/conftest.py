"""A dashboard app on a fresh SQLite database, seeded with two tenants' models, jobs,
artifacts and a shared kernel cache."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from server.core.config import Settings
from server.dashboard.auth import COOKIE_NAME
from server.db.models import Base
from server.main import create_app

from .dashboard_seed import Seeded, seed


@pytest.fixture
def dashboard_app(tmp_path):
    settings = Settings(home=tmp_path / "home", sse_poll_seconds=0.05)
    app = create_app(settings)
    engine = app.state.sessions.kw["bind"]
    Base.metadata.create_all(engine)
    yield app
    engine.dispose()


@pytest.fixture
def seeded(dashboard_app) -> Seeded:
    return seed(dashboard_app)


@pytest.fixture
def client(dashboard_app) -> TestClient:
    """A client that is not logged in (redirects are not followed)."""
    return TestClient(dashboard_app, follow_redirects=False)


@pytest.fixture
def alice(dashboard_app, seeded) -> TestClient:
    """A client logged in as tenant `alice`."""
    c = TestClient(dashboard_app, follow_redirects=False)
    c.cookies.set(COOKIE_NAME, seeded.tokens["alice"])
    return c
