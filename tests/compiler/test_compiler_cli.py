"""The compiler's command line, run as a user runs it (a subprocess)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler.bench.measure import ort_session
from compiler.bench.models import mlp_gelu


def tileforge(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.cli", *args], capture_output=True, text=True,
                          env={"TILEFORGE_HOME": str(home), "PATH": "/usr/bin:/bin", **(env or {})}, timeout=300)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("m") / "mlp.onnx"
    onnx.save(mlp_gelu(batch=2), path)
    return path


def test_compile_then_run_matches_onnxruntime(model_file: Path, tmp_path: Path):
    art = tmp_path / "mlp.tar.gz"
    r = r_compile = tileforge("compile", str(model_file), "-o", str(art), home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "validation" in r.stdout and "passed" in r.stdout and "kernels" in r.stdout
    x = np.random.default_rng(0).standard_normal((2, 256)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = tileforge("run", str(art), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz"),
                  home=tmp_path)
    assert r.returncode == 0, r.stderr
    ref = ort_session(model_file.read_bytes(), 1).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], ref, rtol=1e-4, atol=1e-5)
    again = tileforge("compile", str(model_file), "-o", str(tmp_path / "b.tar.gz"), home=tmp_path)
    # the same plan, every kernel a cache hit (how many kernels depends on the groups the
    # device timed slower than their parts and split back)
    kernels = re.search(r"^kernels +(\d+) ", r_compile.stdout, re.M).group(1)
    assert f"kernels    {kernels}  cache hits {kernels}, misses 0" in again.stdout


def test_bad_model_is_one_clear_line_and_exit_2(tmp_path: Path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not onnx")
    r = tileforge("compile", str(bad), "-o", str(tmp_path / "x.tar.gz"), home=tmp_path)
    assert r.returncode == 2 and "error:" in r.stderr and "Traceback" not in r.stderr


def test_targets_lists_presets_as_json(tmp_path: Path):
    r = tileforge("targets", "--json", home=tmp_path)
    names = {t["name"] for t in json.loads(r.stdout)}
    assert {"cpu", "cuda:h100", "cuda:a100", "cuda:v100"} <= names


def test_bench_reports_both_runtimes(model_file: Path, tmp_path: Path):
    r = tileforge("bench", str(model_file), "--threads", "1", "--json", home=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tileforge_ms"] > 0 and out["onnxruntime_ms"] > 0 and out["rel_l2_error"] <= 1e-4


def test_bench_times_artifacts_compiled_before_in_alternation_with_onnxruntime(model_file: Path, tmp_path: Path):
    arts = []
    for threads in ("1", "2"):
        arts.append(tmp_path / f"mlp-{threads}.tar.gz")
        r = tileforge("compile", str(model_file), "--threads", threads, "-o", str(arts[-1]), home=tmp_path)
        assert r.returncode == 0, r.stderr
    given = [x for a in arts for x in ("--artifact", str(a))]
    r = tileforge("bench", str(model_file), "--threads", "1", "--json", *given, home=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["artifact"] for row in rows] == [str(a) for a in arts]
    for row in rows:
        assert row["tileforge_ms"] > 0 and row["passed"] is True and row["rel_l2_error"] <= 1e-4
        assert row["speedup_vs_onnxruntime"] == round(row["onnxruntime_ms"] / row["tileforge_ms"], 3)
        low, high = row["speedup_spread"]  # the speedup round by round, 10th and 90th percentiles
        assert 0 < low <= high
    assert rows[0]["onnxruntime_ms"] == rows[1]["onnxruntime_ms"]  # one onnxruntime, timed beside both
    r = tileforge("bench", str(model_file), "--artifact", str(arts[0]), home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"{re.escape(str(arts[0]))}: [0-9.]+ ms, [0-9.]+x onnxruntime's [0-9.]+ ms "
                        r"\(medians, alternating, 1 thread\), rounds [0-9.]+-[0-9.]+x \(p10-p90\); "
                        r"rel L2 error \S+\n", r.stdout)


def test_bench_refuses_an_artifact_of_another_model_in_one_line(model_file: Path, tmp_path: Path):
    other = tmp_path / "other.onnx"
    onnx.save(mlp_gelu(batch=3), other)
    art = tmp_path / "other.tar.gz"
    assert tileforge("compile", str(other), "-o", str(art), home=tmp_path).returncode == 0
    for given, why in [(art, "compiled from another model"), (other, "not a readable .tar.gz"),
                       (tmp_path / "missing.tar.gz", "no artifact at")]:
        r = tileforge("bench", str(model_file), "--artifact", str(given), home=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert r.stderr.startswith("error: ") and str(given) in r.stderr and why in r.stderr
        assert r.stderr.count("\n") == 1 and r.stderr.count(str(given)) == 1


def test_bench_exits_1_where_an_artifact_disagrees_with_onnxruntime(monkeypatch, capsys):
    import compiler.bench.measure
    from compiler.bench.measure import ArtifactTiming
    from compiler.cli import main

    rows = [ArtifactTiming("a.tar.gz", 1, 2.0, 1.0, 3e-6, True), ArtifactTiming("b.tar.gz", 1, 1.0, 1.0, 0.25, False)]
    monkeypatch.setattr(compiler.bench.measure, "time_artifacts", lambda *args, **kw: rows)
    monkeypatch.setattr("compiler.pipeline.model_bytes", lambda path: b"")
    assert main(["bench", "m.onnx", "--artifact", "a.tar.gz", "--artifact", "b.tar.gz"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("a.tar.gz: 2.000 ms, 0.50x onnxruntime's 1.000 ms") and out[0].endswith("rel L2 error 3e-06")
    assert out[1].endswith("FAILED validation: rel L2 error 0.25 against onnxruntime")


def test_a_model_over_the_node_cap_is_one_clear_line_and_exit_2(tmp_path: Path):
    from service_kit import OnnxModels

    chain = tmp_path / "chain.onnx"
    chain.write_bytes(OnnxModels.relu_chain(51))
    r = tileforge("compile", str(chain), "-o", str(tmp_path / "x.tar.gz"), home=tmp_path,
                  env={"TILEFORGE_MAX_MODEL_NODES": "50"})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "the model has 51 nodes, over the limit of 50 (TILEFORGE_MAX_MODEL_NODES)" in r.stderr


def test_compile_names_each_timed_lowering_choice():
    from compiler.cli import choice_lines

    choices = [{"kind": "winograd", "key": "winograd x[1, 64, 56, 56] w[64, 64, 3, 3] pads[1, 1, 1, 1] bias0",
                "taken": False, "ms_with": 2.1691, "ms_without": 1.5431},
               {"kind": "winograd", "key": "winograd x[1, 256, 14, 14] w[256, 256, 3, 3] pads[1, 1, 1, 1] bias0",
                "taken": True, "ms_with": 1.7842, "ms_without": 2.0971}]
    assert choice_lines(choices) == [
        "winograd x[1, 64, 56, 56] w[64, 64, 3, 3] pads[1, 1, 1, 1] bias0: not winograd (2.17 ms with, 1.54 ms without)",
        "winograd x[1, 256, 14, 14] w[256, 256, 3, 3] pads[1, 1, 1, 1] bias0: winograd (1.78 ms with, 2.1 ms without)",
    ]
    assert choice_lines([]) == []
    failed = {**choices[0], "ms_with": None, "ms_without": None, "failed": {"with": "BuildError: gcc failed"}}
    assert choice_lines([failed]) == [f"{choices[0]['key']}: not winograd (with failed: BuildError: gcc failed)"]


def test_compile_warns_where_the_references_outputs_vanish(tmp_path: Path):
    """Weights of zero make every output zero: the compile passes validation, and its summary
    says that the comparison checked little."""
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.zeros((64, 32), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32])], [w])
    path = tmp_path / "zero.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = tileforge("compile", str(path), "-o", str(tmp_path / "z.tar.gz"), home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(passed)" in r.stdout
    assert re.search(r"^warning +onnxruntime's y holds no normal number", r.stdout, re.M), r.stdout


def test_compile_without_measuring_times_nothing_and_a_bad_top_k_is_one_line(model_file: Path, tmp_path: Path):
    """--no-measure takes the model's first candidate of every kernel (none timed); --top-k
    passes through to the options, which refuse 0 in one line (exit 2)."""
    import tarfile

    def report_of(path: Path) -> dict:
        with tarfile.open(path) as tar:
            return json.load(tar.extractfile("report.json"))

    art = tmp_path / "fast.tar.gz"
    r = tileforge("compile", str(model_file), "-o", str(art), "--no-measure", "--no-cache", home=tmp_path)
    assert r.returncode == 0, r.stderr
    report = report_of(art)
    assert report["options"]["measure"] is False
    assert all(c["measured_us"] is None for k in report["kernels"] for c in k.get("candidates") or [])
    r = tileforge("compile", str(model_file), "-o", str(tmp_path / "k.tar.gz"), "--top-k", "2", "--no-cache",
                  home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert report_of(tmp_path / "k.tar.gz")["options"]["top_k"] == 2
    bad = tileforge("compile", str(model_file), "-o", str(tmp_path / "b.tar.gz"), "--top-k", "0", home=tmp_path)
    assert bad.returncode == 2 and "top_k" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
