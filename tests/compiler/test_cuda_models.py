"""Issue 2's models compiled for NVIDIA GPUs: every kernel builds with nvcc for sm_80 and
sm_90; where a GPU and pycuda are present the artifacts also run and match onnxruntime."""

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from compiler.bench.models import ZOO
from compiler.pipeline import compile_model

pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")]


def _gpu_present() -> bool:
    try:
        import pycuda.driver as drv

        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


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
    if _gpu_present():
        assert r.validation["passed"] is True and r.validation["rel_l2_error"] <= 1e-4
    else:
        assert r.validation["passed"] is None and "not run" in r.validation["skipped"]
