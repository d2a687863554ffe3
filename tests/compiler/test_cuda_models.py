"""Issue 2's models compiled for NVIDIA GPUs: every kernel builds with nvcc for sm_80 and
sm_90; where a GPU and pycuda are present the artifacts also run and match onnxruntime."""

import json
import tarfile
from pathlib import Path

import pytest

from compiler.backends import backend_for
from compiler.bench.models import ZOO
from compiler.pipeline import compile_model
from compiler.runtime.cuda import gpu_runs
from compiler.target.registry import get_target
from compiler.target.toolchain import find_tool

pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not installed")]


def _gpu_runs(target: str) -> bool:
    """Whether this machine's GPU runs `target`'s cubins."""
    return gpu_runs(get_target(target).arch)


@pytest.mark.parametrize("target", ["cuda:a100", "cuda:h100"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_builds_a_cubin(name: str, target: str, tmp_path: Path):
    r = compile_model(ZOO[name](), target, output=tmp_path / "a.tar.gz")
    with tarfile.open(r.artifact_path) as tar:
        cubin = tar.extractfile("model.cubin").read()
        manifest = json.loads(tar.extractfile("manifest.json").read())
        sources = [m for m in tar.getnames() if m.endswith(".cu")]
    assert cubin[:4] == b"\x7fELF"
    assert manifest["target_kind"] == "cuda"
    assert len(sources) == len({k["symbol"] for k in r.kernels})
    launched = {launch["symbol"] for wave in manifest["cuda_launches"] for launch in wave}
    assert launched == {k["symbol"] for k in r.kernels}
    if _gpu_runs(target):
        assert r.validation["passed"] is True and r.validation["rel_l2_error"] <= 1e-4
        # Roller's top-k on the device: every kernel worth timing was timed on this GPU.
        for k in r.kernels:
            estimates = [c["estimated_us"] for c in k["candidates"]]
            if len(estimates) > 1 and max(estimates) >= backend_for(get_target(target)).measure_threshold_us:
                assert all(c["measured_us"] is not None for c in k["candidates"])
    else:
        assert r.validation["passed"] is None and "not run" in r.validation["skipped"]
