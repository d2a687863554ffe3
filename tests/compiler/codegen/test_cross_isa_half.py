"""float16 kernels give the same bits whatever `-march` builds them.

The generated C computes half values in float and rounds them through integer helpers
(compiler/codegen/cexpr.py), so gcc has no half-precision type to narrow arithmetic to.
Each case's kernels are rendered once (the plan of x86-64-v3) and built for every named
x86 CPU model: every build's machine code is free of half-precision arithmetic, and every
build this host can run gives bit-identical outputs, within the node test's tolerance.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler.cache import MemoryKernelCache
from compiler.frontend.conformance import node_cases
from compiler.frontend.specialize import specialize
from compiler.pipeline import compile_model
from compiler.runtime import load
from compiler.target import get_target
from compiler.target.base import Target
from compiler.target.cpu import host_cannot_run
from compiler.target.cpu_models import CPU_MODELS

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed")

# fp16 node tests whose kernels cover matmuls, softmax, exp / sigmoid chains, convolutions,
# reductions, casts, fmod and comparisons.
CASES = (
    "test_attention_4d_causal_fp16", "test_attention_4d_gqa_with_past_and_present_fp16_expanded",
    "test_linear_attention_fp16", "test_causal_conv_with_state_silu_fp16", "test_swiglu_float16",
    "test_celu_float16", "test_mod_mixed_sign_float16", "test_cast_FLOAT_to_FLOAT16",
    "test_qlinearmatmul_3D_uint8_float16", "test_max_float16",
)
# AVX-512-FP16 arithmetic on half values (scalar `sh`, packed `ph`); the exact conversions
# vcvtph2ps / vcvtps2ph would be harmless but are not expected either.
HALF_ARITHMETIC = re.compile(r"\bv[a-z0-9]*(sh|ph)[xyz]?\b")


def _target_for(model: str) -> Target:
    """x86-64-v3's target (so every build renders the same kernels) built with `model`'s
    flags and requiring its features."""
    base = get_target("cpu:x86-64-v3")
    return replace(base, name=f"cpu:{model}", features=tuple(sorted(CPU_MODELS[model].features)),
                   extras={**base.extras, "isa": model})


def _sources(artifact: Path) -> list[str]:
    """The generated kernel sources, each with its symbol (from the cache key, which holds
    the target's fingerprint) blanked."""
    with tarfile.open(artifact) as tar:
        texts = [tar.extractfile(m).read().decode() for m in tar.getmembers()
                 if m.name.startswith("src/") and m.name != "src/entry.c"]
    return sorted(re.sub(r"tf_[0-9a-f]{20}", "tf_kernel", t) for t in texts)


def _half_instructions(artifact: Path, folder: Path) -> set[str]:
    with tarfile.open(artifact) as tar:
        tar.extract("model.so", folder, filter="data")
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(folder / "model.so")],
                             capture_output=True, text=True, check=True).stdout
    return {m.group(0) for line in listing.splitlines() if "\t" in line
            for m in [HALF_ARITHMETIC.search(line.split("\t")[-1].split(" ")[0])] if m}


@pytest.mark.parametrize("name", CASES)
def test_fp16_builds_agree_bit_for_bit(name: str, tmp_path: Path) -> None:
    case = next(c for c in node_cases() if c.name == name)
    inputs, expected = case.data_sets[0]
    names = [i.name for i in case.model.graph.input]
    feeds = dict(zip(names, inputs, strict=False))
    outputs: dict[str, list[np.ndarray]] = {}
    sources: dict[str, list[str]] = {}
    for model in CPU_MODELS:
        path = tmp_path / f"{model}.tar.gz"

        def build(m: onnx.ModelProto, path: Path = path, model: str = model) -> Path:
            compile_model(m, _target_for(model), {"validate": False, "measure": False},
                          cache=MemoryKernelCache(), output=path)
            return path

        _, frozen = specialize(case.model, feeds, build)
        sources[model] = _sources(path)
        assert _half_instructions(path, tmp_path / model) == set(), f"{model} build holds half-precision instructions"
        if host_cannot_run(_target_for(model)):
            continue  # compiled and inspected only
        got = load(path).run({n: v for n, v in feeds.items() if n not in frozen})
        outputs[model] = [got[o.name] for o in case.model.graph.output]
    assert all(s == sources["x86-64-v3"] for s in sources.values()), "builds rendered different kernels"
    reference = outputs["x86-64-v3"]
    for model, outs in outputs.items():
        for got, want in zip(outs, reference, strict=True):
            assert got.tobytes() == want.tobytes(), f"{name}: the {model} build differs from x86-64-v3's"
    for got, want in zip(reference, expected, strict=True):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=case.rtol, atol=case.atol)
