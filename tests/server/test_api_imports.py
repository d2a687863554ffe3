"""The API process imports neither the worker nor the compiler pipeline (and with it the
scheduler and the code generators): it enqueues tasks by name (issue 15's layering)."""

from __future__ import annotations

from service_kit import loaded_modules


def test_the_api_process_loads_no_worker_and_no_pipeline() -> None:
    mods = loaded_modules("import server.main")
    assert "server.main" in mods and "server.jobs.queue" in mods
    banned = ("worker", "compiler.pipeline", "compiler.schedule", "compiler.codegen", "compiler.build")
    assert [m for m in mods if m.startswith(banned)] == []


def test_the_command_line_loads_no_database_layer_until_a_command_needs_it() -> None:
    """Every `tileforge` command builds the whole parser; `tileforge compile` should not wait
    for SQLAlchemy and the service's settings (1.1 of the 1.5 s the parser took to import)."""
    mods = loaded_modules("import server.cli; server.cli.build_parser()", ("compiler", "server", "worker", "sqlalchemy"))
    assert "server.cli" in mods
    assert [m for m in mods if m.startswith(("sqlalchemy", "server.db", "server.core.security", "server.core.config"))] == []
