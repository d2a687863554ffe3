"""Loading and running an artifact needs none of the compiler's front or middle: the runtime
imports no module of the frontend, the scheduler or the code generators (issue 15's
layering; import-linter checks the source, this checks what actually loads)."""

from __future__ import annotations

from service_kit import loaded_modules


def test_the_runtime_loads_no_frontend_scheduler_or_codegen() -> None:
    mods = loaded_modules("import compiler.runtime, compiler.runtime.cpu, compiler.runtime.cuda, "
                          "compiler.runtime.validate")
    assert "compiler.runtime.cpu" in mods
    banned = ("compiler.codegen", "compiler.schedule", "compiler.frontend", "compiler.pipeline")
    assert [m for m in mods if m.startswith(banned)] == []
