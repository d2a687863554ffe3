"""onnxruntime's outputs recorded by one compile validate the next compile of the same model
(compiler/runtime/recorded.py): no onnxruntime session is made, the check is the same."""

import io
from pathlib import Path

import numpy as np
import pytest

from compiler import pipeline
from compiler.bench.models import mlp_gelu
from compiler.cache import FileKernelCache, KernelEntry, MemoryKernelCache
from compiler.errors import ValidationError
from compiler.pipeline import compile_model
from compiler.runtime import load, recorded, validate

OPTIONS = {"measure": False}


def _count_sessions(monkeypatch) -> list[int]:
    made: list[int] = []
    real = validate.reference_session

    def counted(*a, **k):
        made.append(1)
        return real(*a, **k)
    monkeypatch.setattr(validate, "reference_session", counted)
    return made


def _signature(model) -> object:
    """The record's signature for `model` compiled with the default seed and input shapes."""
    return recorded.reference_signature(pipeline._sha256(pipeline.model_bytes(model)), {}, 0)


def test_a_second_compile_validates_against_the_recorded_run(tmp_path: Path, monkeypatch):
    sessions = _count_sessions(monkeypatch)
    cache = FileKernelCache(tmp_path / "kernels")
    model = mlp_gelu(batch=2)
    first = compile_model(model, "cpu", OPTIONS, cache=cache, output=tmp_path / "a.tar.gz")
    assert first.validation["passed"] and first.validation["reference"] == "onnxruntime"
    assert len(sessions) == 1
    second = compile_model(model, "cpu", {**OPTIONS, "threads": 1}, cache=cache, output=tmp_path / "b.tar.gz")
    assert len(sessions) == 1  # onnxruntime was not loaded again
    assert second.validation["reference"] == "onnxruntime, recorded by an earlier compile"
    assert second.validation["passed"]
    assert second.validation["rel_l2_error"] == pytest.approx(first.validation["rel_l2_error"], rel=1e-3, abs=1e-9)


def test_another_seed_or_input_shape_is_another_record(tmp_path: Path, monkeypatch):
    sessions = _count_sessions(monkeypatch)
    cache = MemoryKernelCache()
    model = mlp_gelu(batch=2)
    compile_model(model, "cpu", OPTIONS, cache=cache, output=tmp_path / "a.tar.gz")
    r = compile_model(model, "cpu", {**OPTIONS, "seed": 1}, cache=cache, output=tmp_path / "b.tar.gz")
    assert len(sessions) == 2 and r.validation["reference"] == "onnxruntime"


def test_recorded_outputs_are_checked_not_trusted(tmp_path: Path):
    """A record whose outputs disagree with the model fails the validation (and the kernels
    of that compile are not cached): the artifact is compared with it as with onnxruntime."""
    cache = MemoryKernelCache()
    model = mlp_gelu(batch=2)
    first = compile_model(model, "cpu", OPTIONS, output=tmp_path / "a.tar.gz")
    exe = load(first.artifact_path)
    feeds = validate.random_inputs(exe.input_specs, validate.reference_for(pipeline.model_bytes(model)).proto, 0)
    wrong = {s.name: exe.run(feeds)[s.name] * 1.5 for s in exe.output_specs}
    assert recorded.record(cache, _signature(model), exe, validate.ReferenceRun(feeds, wrong))
    with pytest.raises(ValidationError):
        compile_model(model, "cpu", OPTIONS, cache=cache, output=tmp_path / "b.tar.gz")
    assert not (tmp_path / "b.tar.gz").exists()


@pytest.mark.parametrize("stored", [b"not an npz", b""])
def test_an_unreadable_record_is_a_miss(tmp_path: Path, stored: bytes, monkeypatch):
    sessions = _count_sessions(monkeypatch)
    cache = MemoryKernelCache()
    model = mlp_gelu(batch=2)
    cache.put(KernelEntry(_signature(model), {}, "", stored))
    r = compile_model(model, "cpu", OPTIONS, cache=cache, output=tmp_path / "a.tar.gz")
    assert r.validation["passed"] and r.validation["reference"] == "onnxruntime" and len(sessions) == 1


def test_a_record_that_does_not_fit_the_executable_is_a_miss(tmp_path: Path):
    model = mlp_gelu(batch=2)
    exe = load(compile_model(model, "cpu", OPTIONS, output=tmp_path / "a.tar.gz").artifact_path)
    specs = [*exe.input_specs, *exe.output_specs]
    arrays = {f"i{k}": np.zeros(s.shape, s.np_dtype) for k, s in enumerate(exe.input_specs)}
    arrays |= {f"o{k}": np.zeros(s.shape, s.np_dtype) for k, s in enumerate(exe.output_specs)}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    assert recorded.fitting(buffer.getvalue(), exe) is not None
    for name, bad in (("i0", np.zeros((3, 3), np.float32)), ("o0", np.zeros(specs[-1].shape, np.float64))):
        buffer = io.BytesIO()
        np.savez(buffer, **{**arrays, name: bad})
        assert recorded.fitting(buffer.getvalue(), exe) is None
    buffer = io.BytesIO()
    np.savez(buffer, **{k: v for k, v in arrays.items() if k != "o0"})
    assert recorded.fitting(buffer.getvalue(), exe) is None


def test_a_run_too_large_is_not_recorded(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(recorded, "RECORD_LIMIT", 16)
    cache = MemoryKernelCache()
    model = mlp_gelu(batch=2)
    compile_model(model, "cpu", OPTIONS, cache=cache, output=tmp_path / "a.tar.gz")
    assert not [e for e in cache.entries().values() if e.signature.op_pattern == recorded.REFERENCE_PATTERN]
