"""The compile-time section of `make bench`: its table, with the big real model's row or the
reason it has none (the compiles themselves are stubbed: they take minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.bench import compile_time
from compiler.bench.compile_time import CompileTimes


@pytest.fixture
def timed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []

    def fake(model: Path) -> CompileTimes:
        seen.append(model)
        return CompileTimes(cold_wall=12.5, warm_wall=2.25, cold_cpu=10.0, warm_cpu=2.0)

    monkeypatch.setattr(compile_time, "cli_compile_times", fake)
    return seen


def test_the_big_model_gets_a_row_with_its_size(timed: list[Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "bert.onnx"
    big.write_bytes(b"\0" * 3_000_000)
    monkeypatch.setattr(compile_time, "_big_model", lambda: (big, ""))
    lines, data = compile_time.compile_time_section()
    assert timed[-1] == big and len(timed) == 2
    assert "| bert (real model, 3 MB ONNX) | 12.50 | 10.00 | 2.25 | 2.00 |" in lines
    assert data["bert"]["warm_wall"] == 2.25 and data["bert"]["onnx_mb"] == 3.0
    assert "transformer_encoder" in data


def test_without_the_big_model_the_section_says_why(timed: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_time, "_big_model", lambda: (None, "torch is not installed here"))
    lines, data = compile_time.compile_time_section()
    assert lines[-1] == "The bert real model was not timed: torch is not installed here."
    assert set(data) == {"transformer_encoder"}
