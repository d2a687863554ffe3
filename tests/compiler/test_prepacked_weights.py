"""Weights that GEMM kernels read packed: packed once when the artifact loads, then read
by every run (compiler/schedule/prepack.py). Checked end to end against onnxruntime."""

import tarfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from compiler.cache import MemoryKernelCache
from compiler.pipeline import compile_model
from compiler.runtime import load


def _model() -> bytes:
    """Gemm with a transposed weight, a MatMul reusing that weight, and a convolution."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((48, 40)).astype(np.float32)
    k = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["g"], transB=1),
             helper.make_node("MatMul", ["g", "w"], ["y"]),
             helper.make_node("Conv", ["img", "k"], ["z"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [20, 40]),
                                       helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 9, 11])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [20, 40]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8, 9, 11])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(k, "k")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_weights_are_packed_at_load_and_every_run_matches_onnxruntime(tmp_path: Path):
    data, cache = _model(), MemoryKernelCache()
    cold = compile_model(data, "cpu", {"measure": False}, cache=cache, output=tmp_path / "cold.tar.gz")
    warm = compile_model(data, "cpu", {"measure": False}, cache=cache, output=tmp_path / "warm.tar.gz")
    assert warm.cache_hits == len(warm.kernels)  # packing functions come back from the cache too
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((20, 40)).astype(np.float32),
             "img": rng.standard_normal((1, 3, 9, 11)).astype(np.float32)}
    ref = dict(zip(["y", "z"], ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds),
                   strict=True))
    for r in (cold, warm):
        with tarfile.open(r.artifact_path) as t:
            entry = t.extractfile("src/entry.c").read().decode()
        prepare = entry[entry.index("int tf_prepare("):entry.index("int tf_run(")]
        assert prepare.count("_pack") == 3  # Gemm's and MatMul's weight, the convolution's filters
        assert "#pragma omp parallel for" in prepare  # the three packers share the threads
        first, second = load(r.artifact_path), load(r.artifact_path, threads=1)
        for exe in (first, second, first):  # each executable packs into its own arena, once
            out = exe.run(feeds)
            for name in ("y", "z"):
                np.testing.assert_allclose(out[name], ref[name], rtol=1e-4, atol=1e-4)
