"""Stored CPU measurements and their use by the cpu target."""

import json

from compiler.target import detect_cpu, measure_cpu
from compiler.target.cpu import read_cpu_facts
from compiler.target.measure import MEASUREMENTS_FILE, load_cpu_measurements


def test_measure_stores_numbers_that_detect_cpu_then_uses(tmp_path):
    result = measure_cpu(tmp_path, copy_bytes=8 << 20, matmul_n=128, repeats=2)
    stored = json.loads((tmp_path / MEASUREMENTS_FILE).read_text())
    assert stored == result
    assert result["dram_bandwidth"] > 1e8 and result["flops_1thread"] > 1e7
    t = detect_cpu(tmp_path)
    assert t.extras["measured"] == 1
    assert t.level("dram").bandwidth == result["dram_bandwidth"]
    assert t.peak_flops["float32"] == result["flops_all_threads"]


def test_measurements_from_another_cpu_or_corrupt_are_ignored(tmp_path):
    facts = read_cpu_facts()
    path = tmp_path / MEASUREMENTS_FILE
    numbers = {"dram_bandwidth": 1e10, "flops_1thread": 1e10, "flops_all_threads": 2e10}
    path.write_text(json.dumps({"cpu_model": "other", "cores": facts.cores, **numbers}))
    assert load_cpu_measurements(facts.model, facts.cores, tmp_path) is None
    path.write_text("{not json")
    assert load_cpu_measurements(facts.model, facts.cores, tmp_path) is None
    assert detect_cpu(tmp_path).extras["measured"] == 0
    path.write_text(json.dumps({"cpu_model": facts.model, "cores": facts.cores, **numbers}))
    assert detect_cpu(tmp_path).level("dram").bandwidth == 1e10


def test_default_location_follows_tileforge_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFORGE_HOME", str(tmp_path))
    facts = read_cpu_facts()
    folder = tmp_path / "targets"
    folder.mkdir()
    (folder / MEASUREMENTS_FILE).write_text(json.dumps({
        "cpu_model": facts.model, "cores": facts.cores, "dram_bandwidth": 3e10,
        "flops_1thread": 1e10, "flops_all_threads": 2e10}))
    assert detect_cpu().level("dram").bandwidth == 3e10
