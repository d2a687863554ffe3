"""`tileforge profile`, run as a user runs it: the roofline table of a model built in code."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.profile import COLUMNS
from compiler.target.measure import measure_cpu

M, K, N = 64, 96, 80  # the MatMul: (M, K) x (K, N)
ELEMS = 1 << 16  # the Add's elements


def tileforge(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.cli", *args], capture_output=True, text=True,
                          env={"TILEFORGE_HOME": str(home), "PATH": "/usr/bin:/bin"}, timeout=300)


def _model() -> onnx.ModelProto:
    """y = x @ W (x's batch dim symbolic) and, independent of it, z = a + b: two kernels."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((K, N)).astype(np.float32), "W")
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Add", ["a", "b"], ["z"])], "two",
        [helper.make_tensor_value_info("x", f, ["batch", K]), helper.make_tensor_value_info("a", f, [ELEMS]),
         helper.make_tensor_value_info("b", f, [ELEMS])],
        [helper.make_tensor_value_info("y", f, ["batch", N]), helper.make_tensor_value_info("z", f, [ELEMS])],
        [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("m") / "two.onnx"
    onnx.save(_model(), path)
    return path


@pytest.fixture(scope="module")
def measured_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TILEFORGE_HOME holding this machine's measured peak and bandwidth (small runs)."""
    home = tmp_path_factory.mktemp("home")
    measure_cpu(home / "targets", copy_bytes=32 << 20, matmul_n=256, repeats=3)
    return home


def test_rows_hold_the_formulas_work_against_the_measured_bounds(model_file: Path, measured_home: Path):
    r = tileforge("profile", str(model_file), "--threads", "2", "--input-shape", f"x={M},{K}", "--json",
                  home=measured_home)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    stored = json.loads((measured_home / "targets" / "cpu-measured.json").read_text())
    cores = stored["cores"]
    assert p["bounds"]["bandwidth_gbs"] == pytest.approx(stored["dram_bandwidth"] / 1e9, abs=1e-3)
    # two threads of the measured machine: the all-core peak scaled to them
    assert p["bounds"]["peak_gflops"] == pytest.approx(
        stored["flops_all_threads"] * min(2, cores) / cores / 1e9, abs=1e-3)
    assert p["validated"] is True and p["model_us"] > 0
    rows = {r["op_pattern"]: r for r in p["rows"]}
    assert set(rows) == {"MatMul", "Add"}
    assert (rows["MatMul"]["flops"], rows["MatMul"]["dram_bytes"]) == (2 * M * N * K, (M * K + K * N + M * N) * 4)
    assert (rows["Add"]["flops"], rows["Add"]["dram_bytes"]) == (ELEMS, 3 * ELEMS * 4)
    for row in p["rows"]:
        assert row["bound"] in {"compute", "memory"} and row["measured_us"] > 0
        # the JSON's numbers are rounded (times to 1 ns, % to 0.1, share to 1e-4): compare within that
        assert row["pct_of_bound"] == pytest.approx(100 * row["bound_us"] / row["measured_us"], rel=1e-3, abs=0.05)
        assert row["lost_us"] == pytest.approx(row["measured_us"] - row["bound_us"], abs=0.01)
        assert row["share"] == pytest.approx(row["measured_us"] / p["model_us"], rel=1e-3, abs=1e-4)
    assert [row["lost_us"] for row in p["rows"]] == sorted((row["lost_us"] for row in p["rows"]), reverse=True)
    assert p["kernels_us"] == pytest.approx(sum(row["measured_us"] for row in p["rows"]), abs=0.01)


def test_table_has_its_columns_and_the_model_total(model_file: Path, measured_home: Path):
    r = tileforge("profile", str(model_file), "--input-shape", f"x={M},{K}", home=measured_home)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "(measured)" in lines[1] and lines[2].startswith("model") and "of the model" in lines[2]
    header = lines[4]
    assert [c for c in COLUMNS if c not in header] == []
    body = lines[5:]
    assert sorted(line.split()[1] for line in body) == ["Add", "MatMul"]


def test_a_target_without_measurements_says_so(model_file: Path, tmp_path: Path):
    r = tileforge("profile", str(model_file), "--input-shape", f"x={M},{K}", home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "no measured peak" in r.stdout and "tileforge targets --measure" in r.stdout
    assert all(line.split()[8] == "-" for line in r.stdout.splitlines()[5:])  # no bound column


@pytest.mark.parametrize("args, says", [
    ((), "batch"),  # the symbolic dim left unbound
    (("--input-shape", "x=oops"), "--input-shape"),
])
def test_bad_invocations_are_one_line(model_file: Path, tmp_path: Path, args, says):
    r = tileforge("profile", str(model_file), *args, home=tmp_path)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr


def test_a_file_that_is_not_onnx_is_one_line(tmp_path: Path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    r = tileforge("profile", str(bad), home=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr
    r = tileforge("profile", str(tmp_path / "missing.onnx"), home=tmp_path)
    assert r.returncode == 2 and "cannot read model file" in r.stderr
