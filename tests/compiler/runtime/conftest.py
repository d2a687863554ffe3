"""Fixtures of the runtime tests."""

from pathlib import Path

import pytest
from handbuilt import EXTRA, artifact_files, graph, whole

from compiler.package import write_artifact
from compiler.schedule.planner import build_plan


@pytest.fixture(scope="session")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-built model's artifact (built once; tests must not modify it)."""
    g = graph()
    plan = build_plan(g, "cpu:test:0", whole)
    path = tmp_path_factory.mktemp("artifact") / "model.tar.gz"
    write_artifact(path, plan, artifact_files(g, plan), EXTRA, {"kernels": len(plan.kernels)})
    return path
