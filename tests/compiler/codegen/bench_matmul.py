"""Matmul GFLOP/s of the generated C kernel against onnxruntime, both single-threaded.

    OMP_NUM_THREADS=1 .venv/bin/python tests/compiler/codegen/bench_matmul.py [N]

Not a test (pytest does not collect it): a measurement to read. The kernel is
tiled by `default_tile` for this machine's CPU target; runs alternate between the
two so that load from other processes hits both alike; best of the runs is shown.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).parent))
from c_harness import KernelLibrary

from compiler.ir.te import Axis, Compute, Load, TensorType, Var
from compiler.schedule.tiling import default_tile
from compiler.target.cpu import detect_cpu

RUNS = 20


def main(n: int) -> None:
    i, j, r = Var("i0"), Var("i1"), Var("r0")
    c = Compute((Axis("i0", n), Axis("i1", n)), Load(0, (i, r), "float32") * Load(1, (r, j), "float32"),
                (TensorType((n, n), "float32"), TensorType((n, n), "float32")), "float32",
                (Axis("r0", n),), "sum", label="MatMul")
    tile = default_tile(c, detect_cpu())
    with tempfile.TemporaryDirectory() as d:
        lib = KernelLibrary({"mm": (c, tile)}, Path(d))
        a, b = (np.random.default_rng(k).standard_normal((n, n), np.float32) for k in (0, 1))
        out = np.empty((n, n), np.float32)
        kernel = lib.lib.mm
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["c"])], "mm",
            [helper.make_tensor_value_info(x, TensorProto.FLOAT, [n, n]) for x in "ab"],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(lib.run("mm", [a, b]), session.run(None, {"a": a, "b": b})[0],
                                   rtol=1e-3, atol=1e-3)
        ours, theirs = [], []
        for _ in range(RUNS):
            t = time.perf_counter()
            kernel(out.ctypes.data, a.ctypes.data, b.ctypes.data)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            session.run(None, {"a": a, "b": b})
            theirs.append(time.perf_counter() - t)
    flop = 2 * n**3
    print(f"matmul {n}^3 float32, tile {tile.to_json()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    print(f"tileforge C kernel: {min(ours) * 1e3:.2f} ms  {flop / min(ours) / 1e9:.1f} GFLOP/s")
    print(f"onnxruntime 1 thread: {min(theirs) * 1e3:.2f} ms  {flop / min(theirs) / 1e9:.1f} GFLOP/s")
    print(f"ratio: {min(theirs) / min(ours):.0%} of onnxruntime")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 512)
