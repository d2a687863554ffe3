"""Custom targets from JSON / YAML files."""

import json

import pytest

from compiler.errors import TargetError
from compiler.target import get_target, load_target_file

FULL = {
    "name": "toy-gpu", "kind": "cuda", "arch": "sm_80", "units": 4, "lanes": 32, "banks": 32,
    "registers": 65536, "peak_flops": {"float32": 1e12},
    "levels": [
        {"name": "dram", "capacity": 1 << 30, "bandwidth": 1e11, "transaction": 32},
        {"name": "smem", "capacity": 48 << 10, "bandwidth": 1e12, "transaction": 4},
        {"name": "reg", "capacity": 256 << 10, "bandwidth": 1e13, "transaction": 4},
    ],
}


def test_full_json_target(tmp_path):
    p = tmp_path / "toy.json"
    p.write_text(json.dumps(FULL))
    t = get_target(str(p), allow_files=True)
    assert t.name == "toy-gpu" and t.units == 4 and t.level("dram").shared
    assert t.extras["smem_per_block"] == 48 << 10  # filled from the smem level
    assert t.toolchain.startswith("nvcc")


def test_yaml_override_of_a_preset(tmp_path):
    p = tmp_path / "a100-40g.yaml"
    p.write_text("base: cuda:a100\nname: a100-40g\nunits: 100\n")
    t = load_target_file(p)
    a100 = get_target("cuda:a100")
    assert t.name == "a100-40g" and t.units == 100
    assert t.levels == a100.levels and t.arch == "sm_80"


@pytest.mark.parametrize(("patch", "message"), [
    ({"units": -1}, r"'units' must be a positive integer"),
    ({"units": "many"}, r"'units' must be a positive integer"),
    ({"kind": "tpu"}, r"'kind' must be one of"),
    ({"arch": "sm_80; rm -rf /"}, r"'arch' must match"),
    ({"colour": "red"}, r"unknown fields \['colour'\]"),
    ({"peak_flops": {"float16": 1e12}}, r"include 'float32'"),
    ({"levels": FULL["levels"][:2]}, r"missing \['reg'\]"),
    ({"levels": [{**FULL["levels"][0], "bandwidth": 0}]}, r"levels\[0\]\.'bandwidth'"),
    ({"toolchain": "gcc 1"}, r"read from the installed compiler"),
    ({"base": "nope.yaml"}, r"'base' must name a preset"),
])
def test_bad_files_get_clear_errors(tmp_path, patch, message):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({**FULL, **patch}))
    with pytest.raises(TargetError, match=message) as e:
        get_target(str(p), allow_files=True)
    assert str(p) in str(e.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(TargetError, match="cannot be read"):
        get_target(str(tmp_path / "absent.yaml"), allow_files=True)
    p = tmp_path / "broken.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(TargetError, match="not valid YAML"):
        get_target(str(p), allow_files=True)
    p.write_text("- just\n- a list\n")
    with pytest.raises(TargetError, match="mapping"):
        get_target(str(p), allow_files=True)


def test_files_are_refused_unless_allowed(tmp_path):
    p = tmp_path / "secret.json"
    p.write_text(json.dumps({"password": "hunter2"}))
    with pytest.raises(TargetError, match="read only for local use") as e:
        get_target(str(p))
    assert "password" not in str(e.value)
    with pytest.raises(TargetError, match=r"unknown fields \['password'\]"):
        get_target(str(p), allow_files=True)
