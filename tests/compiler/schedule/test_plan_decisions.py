"""The plan carries every decision below the rTile (issue 15): a CPU contraction's GEMM
blocking, a CPU row group's member tiles and a CUDA kernel's launch shape are in the
kernel's TileConfig, made when the plan is built, and they survive the manifest's JSON
and the kernel cache unchanged."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from compiler.abi import MANIFEST_LAUNCHES
from compiler.bench.models import conv_stage, mlp_gelu, transformer_encoder
from compiler.cache import MemoryKernelCache
from compiler.pipeline import compile_model
from compiler.schedule.plan import TileConfig
from compiler.target.toolchain import find_tool

CPU = "cpu:x86-64-v3"  # a named target: the plan does not depend on this host
OPTIONS = {"validate": False, "measure": False, "threads": 2}


def _manifest(artifact: Path) -> dict:
    with tarfile.open(artifact) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        return json.loads(member.read())


def _tiles(manifest: dict) -> dict[str, TileConfig]:
    """Each kernel's tile as the manifest records it, read back (symbol -> tile)."""
    return {k["symbol"]: TileConfig.from_json(k["tile"]) for k in manifest["kernels"]}


def _round_trips(manifest: dict) -> bool:
    """Whether every kernel's tile in the manifest reads back as the tile written."""
    return all(TileConfig.from_json(k["tile"]).to_json() == k["tile"] for k in manifest["kernels"])


def test_cpu_contractions_carry_their_gemm_blocking(tmp_path: Path) -> None:
    cache = MemoryKernelCache()
    first = _manifest(compile_model(conv_stage(channels=16, size=16), CPU, OPTIONS, cache=cache,
                                    output=tmp_path / "a.tar.gz").artifact_path)
    tiles = _tiles(first)
    convs = [k["symbol"] for k in first["kernels"] if "Conv" in k["ops"]]
    assert convs and all(tiles[s].gemm is not None for s in convs)
    for s in convs:
        g = tiles[s].gemm
        assert g is not None
        assert g.mc % g.mk.rows == 0 and g.nc % g.mk.cols == 0 and 1 <= g.kc <= g.k
        assert {p.input for p in g.packed} <= {1, 2}  # only weights are packed at load
    assert all(tiles[s].gemm is None for s in tiles if s not in convs)  # pooling: no GEMM
    assert _round_trips(first)
    # the kernel cache stores the same blocking, so a hit is placed as it was rendered
    assert all(cache.entries()[k["key"]].tile_config == k["tile"] for k in first["kernels"])
    again = compile_model(conv_stage(channels=16, size=16), CPU, OPTIONS, cache=cache, output=tmp_path / "b.tar.gz")
    assert again.cache_misses == 0
    second = _manifest(again.artifact_path)
    assert [k["tile"] for k in second["kernels"]] == [k["tile"] for k in first["kernels"]]
    assert second["arena_bytes"] == first["arena_bytes"]  # the prepacked regions placed alike


def test_cpu_row_groups_carry_their_member_tiles(tmp_path: Path) -> None:
    manifest = _manifest(compile_model(transformer_encoder(seq=16, hidden=64, heads=2, ffn=128), CPU, OPTIONS,
                                       output=tmp_path / "t.tar.gz").artifact_path)
    tiles = _tiles(manifest)
    groups = [t for t in tiles.values() if t.members]
    assert groups, "the encoder's softmax and layer norms are row groups"
    for t in groups:
        # a tile per member, for the full block of rows and a shorter last one where there is one
        assert 1 <= len(t.members) <= 2 and len({len(block) for block in t.members}) == 1
        assert all(m.gemm is None and not m.members for block in t.members for m in block)
    assert _round_trips(manifest)


@pytest.mark.nvcc
@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not installed")
def test_cuda_kernels_carry_their_launch_shapes(tmp_path: Path) -> None:
    manifest = _manifest(compile_model(mlp_gelu(batch=4, dims=(64, 128, 32)), "cuda:h100",
                                       {"validate": False, "measure": False},
                                       output=tmp_path / "g.tar.gz").artifact_path)
    tiles = _tiles(manifest)
    assert all(t.launch is not None for t in tiles.values())
    assert "gemm" in {t.launch.kind for t in tiles.values() if t.launch is not None}
    # the launch table the CUDA runtime reads is the plan's recorded grid and block
    for wave in manifest[MANIFEST_LAUNCHES]:
        for entry in wave:
            launch = tiles[entry["symbol"]].launch
            assert launch is not None
            assert (entry["grid"], entry["block"]) == (list(launch.grid), list(launch.block))
    assert _round_trips(manifest)
