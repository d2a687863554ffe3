"""Issue 2's models, end to end on the CPU: compile, run from the artifact, match onnxruntime."""

from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler.bench.measure import ort_session
from compiler.bench.models import ZOO, transformer_encoder
from compiler.cache import FileKernelCache
from compiler.errors import ModelError
from compiler.pipeline import STAGES, compile_model
from compiler.runtime import load


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run_both(model: onnx.ModelProto, artifact: Path, seed: int = 7) -> list[tuple[np.ndarray, np.ndarray]]:
    exe = load(artifact)
    rng = np.random.default_rng(seed)
    feeds = {s.name: rng.standard_normal(s.shape).astype(s.dtype) for s in exe.input_specs}
    ours = exe.run(feeds)
    ref = ort_session(model.SerializeToString(), 1).run(None, feeds)
    names = [o.name for o in model.graph.output]
    return [(ours[n], r) for n, r in zip(names, ref, strict=True)]


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_compiles_runs_and_matches_onnxruntime(name: str, tmp_path: Path):
    model = ZOO[name]()
    stages = []
    result = compile_model(model, "cpu", {"tolerance": 1e-4}, output=tmp_path / "a.tar.gz",
                           progress=lambda s, f: stages.append(s))
    assert result.validation["passed"] and result.validation["rel_l2_error"] <= 1e-4
    assert [s for s in stages if s != "done"] == list(STAGES)
    for ours, ref in run_both(model, result.artifact_path):
        assert ours.shape == ref.shape
        assert rel_l2(ours, ref) <= 1e-4


def test_second_compile_reuses_every_kernel(tmp_path: Path):
    cache = FileKernelCache(tmp_path / "kernels")
    model = ZOO["mlp_gelu"]()
    first = compile_model(model, "cpu", cache=cache, output=tmp_path / "1.tar.gz")
    second = compile_model(model, "cpu", cache=cache, output=tmp_path / "2.tar.gz")
    assert first.cache_misses > 0
    assert second.cache_misses == 0 and second.cache_hits == len(second.kernels)
    for ours, ref in run_both(model, second.artifact_path):
        assert rel_l2(ours, ref) <= 1e-4


def test_symbolic_batch_is_bound_from_input_shapes(tmp_path: Path):
    model = transformer_encoder(seq=16, hidden=64, heads=2, ffn=128, batch="batch")
    with pytest.raises(ModelError, match="batch"):
        compile_model(model, "cpu", output=tmp_path / "x.tar.gz")
    r = compile_model(model, "cpu", {"input_shapes": {"x": [3, 16, 64]}}, output=tmp_path / "b.tar.gz")
    exe = load(r.artifact_path)
    assert [tuple(s.shape) for s in exe.input_specs] == [(3, 16, 64)]
    assert r.validation["passed"]
