"""The compile-time section of `make bench`: its table, with a row for each big real model or
the reason it has none (the compiles themselves are stubbed: they take minutes)."""

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


def test_each_big_model_gets_a_row_with_its_size(timed: list[Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    paths = {}
    for name, mb in zip(compile_time.BIG_MODELS, (3, 5, 4), strict=True):
        paths[name] = tmp_path / f"{name}.onnx"
        paths[name].write_bytes(b"\0" * mb * 1_000_000)
    monkeypatch.setattr(compile_time, "_big_model", lambda name: (paths[name], ""))
    lines, data = compile_time.compile_time_section()
    assert timed[1:] == [paths["bert"], paths["gpt2"], paths["resnet50"]]
    assert "| bert (real model, 3 MB ONNX) | 12.50 | 10.00 | 2.25 | 2.00 |" in lines
    assert "| gpt2 (real model, 5 MB ONNX) | 12.50 | 10.00 | 2.25 | 2.00 |" in lines
    assert "| resnet50 (real model, 4 MB ONNX) | 12.50 | 10.00 | 2.25 | 2.00 |" in lines
    assert data["bert"]["warm_wall"] == 2.25 and data["gpt2"]["onnx_mb"] == 5.0
    assert "transformer_encoder" in data


def test_without_a_big_model_the_section_says_why(timed: list[Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    bert = tmp_path / "bert.onnx"
    bert.write_bytes(b"\0" * 2_000_000)
    monkeypatch.setattr(compile_time, "_big_model",
                        lambda name: (bert, "") if name == "bert" else (None, "its export failed (OSError: disk full)"))
    lines, data = compile_time.compile_time_section()
    assert "The gpt2 real model was not timed: its export failed (OSError: disk full)." in lines
    assert "| bert (real model, 2 MB ONNX) | 12.50 | 10.00 | 2.25 | 2.00 |" in lines
    assert set(data) == {"transformer_encoder", "bert"}
