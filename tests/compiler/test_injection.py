"""Model-derived strings never reach generated source: hostile names compile and run."""

import tarfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.pipeline import compile_model
from compiler.runtime import load

HOSTILE = [
    '*/ system("rm -rf /"); /*',
    'x"; #include </etc/passwd>\n int main(){}',
    "line1\nline2\r\n\\",
    "K" * 10_000,
    "ünï€ode ✓",
]


def hostile_model() -> onnx.ModelProto:
    x, w, h, y = HOSTILE[0], HOSTILE[1], HOSTILE[2], HOSTILE[4]
    nodes = [
        helper.make_node("MatMul", [x, w], [h], name=HOSTILE[3], doc_string=HOSTILE[0]),
        helper.make_node("Relu", [h], [y], name=HOSTILE[1]),
    ]
    wt = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32), w)
    g = helper.make_graph(nodes, HOSTILE[2], [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info(y, TensorProto.FLOAT, [2, 4])], [wt],
                          doc_string=HOSTILE[3])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name=HOSTILE[0])


def test_hostile_names_compile_and_never_reach_source(tmp_path: Path):
    model = hostile_model()
    r = compile_model(model, "cpu", output=tmp_path / "a.tar.gz")
    assert r.validation["passed"]
    with tarfile.open(r.artifact_path) as tar:
        sources = [tar.extractfile(m).read() for m in tar.getmembers()
                   if m.isfile() and m.name.endswith((".c", ".cu"))]
    assert sources
    markers = ["rm -rf", "system(", "/etc/passwd", "line1", "KKKKKKKK", "ünï€ode"]
    for src in sources:
        for marker in markers:
            assert marker.encode() not in src, marker
    exe = load(r.artifact_path)
    x = np.ones((2, 8), np.float32)
    out = exe.run({HOSTILE[0]: x})
    w = numpy_helper.to_array(model.graph.initializer[0])
    np.testing.assert_allclose(out[HOSTILE[4]], np.maximum(x @ w, 0), rtol=1e-5)
