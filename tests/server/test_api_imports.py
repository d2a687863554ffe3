"""The API process imports neither the worker nor the compiler pipeline (and with it the
scheduler and the code generators): it enqueues tasks by name (issue 15's layering)."""

from __future__ import annotations

from service_kit import loaded_modules


def test_the_api_process_loads_no_worker_and_no_pipeline() -> None:
    mods = loaded_modules("import server.main")
    assert "server.main" in mods and "server.jobs.queue" in mods
    banned = ("worker", "compiler.pipeline", "compiler.schedule", "compiler.codegen", "compiler.build")
    assert [m for m in mods if m.startswith(banned)] == []
