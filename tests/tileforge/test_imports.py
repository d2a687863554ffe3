"""The client installs without the compiler: importing it loads none of the service's
packages nor their heavy dependencies."""

from service_kit import loaded_modules

HEAVY = ("compiler", "server", "worker", "onnx", "onnxruntime", "sqlalchemy", "celery")


def test_import_tileforge_loads_nothing_of_the_compiler_or_the_service() -> None:
    assert loaded_modules("import tileforge, tileforge.cli", HEAVY) == []
    assert "tileforge.client" not in loaded_modules("import tileforge, tileforge.cli", ("tileforge",))
    assert "tileforge.client" in loaded_modules("import tileforge; tileforge.Client", ("tileforge",))
