"""The NVIDIA presets: datasheet numbers, levels and fingerprints."""

import pytest

from compiler.target import get_target
from compiler.target.cuda import SPECS, compute_capability, preset_for_device

ARCHS = {"v100": "sm_70", "t4": "sm_75", "a100": "sm_80", "a10": "sm_86", "l4": "sm_89",
         "rtx3090": "sm_86", "rtx4090": "sm_89", "h100": "sm_90", "h200": "sm_90"}


@pytest.mark.parametrize("key", sorted(ARCHS))
def test_preset_shape(key):
    t = get_target(f"cuda:{key}")
    assert t.kind == "cuda" and t.arch == ARCHS[key]
    assert [lv.name for lv in t.levels] == ["dram", "l2", "smem", "reg"]
    assert t.lanes == 32 and t.banks == 32 and t.registers == 65536
    assert t.extras["max_threads_per_block"] == 1024
    assert t.extras["smem_static_per_block"] <= t.extras["smem_per_block"] <= t.level("smem").capacity
    assert t.peak_flops["float16_tensor"] > t.peak_flops["float32"]
    # bandwidth grows inward (DRAM slowest), capacity shrinks
    bws = [lv.bandwidth for lv in t.levels]
    assert bws == sorted(bws)
    assert t.level("l2").capacity < t.level("dram").capacity


def test_datasheet_numbers():
    h100, a100, v100 = (get_target(f"cuda:{k}") for k in ("h100", "a100", "v100"))
    assert h100.units == 132 and a100.units == 108 and v100.units == 80
    assert h100.level("dram").bandwidth == pytest.approx(3.35e12)
    assert get_target("cuda:h200").level("dram").bandwidth > h100.level("dram").bandwidth
    assert a100.level("l2").capacity == 40 << 20
    assert "bfloat16_tensor" not in v100.peak_flops and "bfloat16_tensor" in a100.peak_flops


def test_same_arch_shares_a_fingerprint_different_arch_does_not():
    fp = {s.key: get_target(f"cuda:{s.key}").fingerprint() for s in SPECS}
    assert fp["h100"] == fp["h200"]
    assert fp["a100"] != fp["h100"]
    assert fp["h100"].startswith("cuda:sm_90:")


def test_toolchain_is_nvcc_or_marked_unavailable():
    tc = get_target("cuda:t4").toolchain
    assert tc.startswith("nvcc") and (tc == "nvcc-unavailable" or "nvcc:" in tc)


def test_compute_capability():
    assert compute_capability("sm_90") == "9.0"
    assert compute_capability("sm_86") == "8.6"
    assert compute_capability("sm_90a") == "9.0"


@pytest.mark.parametrize(("name", "capability", "target"), [
    ("NVIDIA H100 80GB HBM3", (9, 0), "cuda:h100"),
    ("NVIDIA H200", (9, 0), "cuda:h200"),
    ("NVIDIA A100-SXM4-80GB", (8, 0), "cuda:a100"),
    ("NVIDIA A10", (8, 6), "cuda:a10"),
    ("NVIDIA GeForce RTX 4090", (8, 9), "cuda:rtx4090"),
    ("NVIDIA L40S", (8, 9), "cuda:sm_89"),  # not the L4: no preset, its arch
    ("Tesla P100-PCIE-16GB", (6, 0), "cuda:sm_60"),
    ("NVIDIA H100 PCIe", (8, 0), "cuda:sm_80"),  # a name that disagrees with its arch
])
def test_device_names_map_to_their_preset_or_their_arch(name: str, capability: tuple[int, int],
                                                        target: str) -> None:
    assert preset_for_device(name, capability) == target
