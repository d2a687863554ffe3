"""The database kernel cache: exact round trip, hit counting, insert-or-ignore under concurrency."""

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
from compiler.ir.te import Axis, Compute, Load, TensorType, Var
from compiler.schedule.cpu_tile import plan_cpu_tile
from compiler.schedule.cuda_tile import plan_cuda_tile
from compiler.schedule.plan import TileConfig
from compiler.schedule.tiling import default_tile
from compiler.target import get_target
from server.db.kernel_cache import mark_stale_kernels
from server.db.models import Kernel
from server.db.session import transaction
from worker.kernel_cache import DatabaseKernelCache


def entry(op: str = "MatMul", source: str = "void k0(void) {}", fingerprint: str | None = None) -> KernelEntry:
    sig = KernelSignature(op_pattern=op, shapes="[[4, 8], [8, 2], [4, 2]]", dtypes='["float32"]',
                          te_hash="ab" * 32, target_fingerprint="cpu:x86_64:0123456789abcdef",
                          compiler_fingerprint=fingerprint or compiler_fingerprint(), options="{}")
    return KernelEntry(signature=sig, tile_config={"tile": [4, 2]}, source=source,
                       binary=b"\x7fELF\x00\x01binary", te_json='{"op":"matmul"}', estimated_us=1.5,
                       measured_us=2.0, validation_error=1e-7, extras={"threads": 2})


def test_round_trip_and_hit_count(db_sessions):
    cache = DatabaseKernelCache(db_sessions)
    e = entry()
    assert cache.get(e.signature) is None
    cache.put(e)
    got = cache.get(e.signature)
    assert got == e and got.key == e.key
    cache.get(e.signature)
    with db_sessions() as s:
        row = s.get(Kernel, e.key)
        assert row.hit_count == 2 and not row.stale
        assert row.op_pattern == "MatMul" and row.target_fingerprint.startswith("cpu:")


def test_put_is_insert_or_ignore(db_sessions):
    cache = DatabaseKernelCache(db_sessions)
    first, second = entry(source="first"), entry(source="second")
    assert first.key == second.key
    cache.put(first)
    cache.put(second)
    assert cache.get(first.signature).source == "first"


def test_concurrent_writers_store_each_kernel_once(db_sessions):
    cache = DatabaseKernelCache(db_sessions)
    entries = [entry(op=f"Op{i % 3}", source=f"writer {i}") for i in range(24)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(cache.put, entries))
    with db_sessions() as s:
        assert s.scalar(select(func.count()).select_from(Kernel)) == 3


def test_old_compiler_rows_are_marked_stale_and_never_served(db_sessions):
    cache = DatabaseKernelCache(db_sessions)
    old = entry(fingerprint="0" * 16)
    cache.put(old)
    with db_sessions() as s:
        assert s.get(Kernel, old.key).stale  # stale from birth: not this compiler's
        s.execute(Kernel.__table__.update().values(stale=False))
        s.commit()
    with transaction(db_sessions) as s:
        assert mark_stale_kernels(s) == 1
    assert cache.get(old.signature) is None


def test_planned_tiles_read_back_as_written(db_sessions):
    """A tile with the decisions below the rTile (a CPU GEMM blocking with a weight packed
    at load, a CUDA launch) reads back from the cache as the tile written: a hit is placed
    and launched as it was rendered."""
    i, j, r = Var("i"), Var("j"), Var("r")
    c = Compute((Axis("i", 64), Axis("j", 48)), Load(0, (i, r), "float32") * Load(1, (r, j), "float32"),
                (TensorType((64, 40), "float32"), TensorType((40, 48), "float32")), "float32",
                (Axis("r", 40),), "sum")
    cpu, gpu = get_target("cpu:x86-64-v3"), get_target("cuda:h100")
    tiles = [plan_cpu_tile(c, default_tile(c, cpu), cpu, (1,)), plan_cuda_tile(c, default_tile(c, gpu))]
    assert tiles[0].gemm is not None and tiles[0].gemm.packed and tiles[1].launch is not None
    cache = DatabaseKernelCache(db_sessions)
    for n, tile in enumerate(tiles):
        e = dataclasses.replace(entry(op=f"MatMul{n}"), tile_config=tile.to_json())
        cache.put(e)
        got = cache.get(e.signature)
        assert got is not None and TileConfig.from_json(got.tile_config) == tile


def test_a_forged_hash_collision_is_a_miss(db_sessions):
    """A row stored under a key whose signature is another kernel's (what a sha256 collision
    would leave) is not served for that key: the whole stored signature must match."""
    cache = DatabaseKernelCache(db_sessions)
    stored, wanted = entry(op="MatMul"), entry(op="Gemm")
    cache.put(stored)
    with transaction(db_sessions) as s:  # forge: the stored row now answers to `wanted`'s key
        s.execute(Kernel.__table__.update().where(Kernel.key == stored.key).values(key=wanted.key))
    assert cache.get(wanted.signature) is None
    with db_sessions() as s:
        assert s.get(Kernel, wanted.key).hit_count == 0  # a collision counts no hit


def test_put_records_the_rows_size(db_sessions):
    e = entry()
    DatabaseKernelCache(db_sessions).put(e)
    with db_sessions() as s:
        assert s.get(Kernel, e.key).size_bytes == len(e.source) + len(e.binary) + len(e.te_json) > 0


def test_a_lowering_choice_is_kept_and_read_back_like_a_kernel(db_sessions, tmp_path, monkeypatch):
    """The pipeline's answer to a lowering choice (op pattern choice:*, no binary) goes into
    the database cache a worker compiles against, and the next compile reads it back instead
    of timing again."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from compiler.pipeline import _Compilation, compile_model

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 28, 28])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 28, 28])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    cache = DatabaseKernelCache(db_sessions)
    first = compile_model(model, "cpu", {"threads": 1}, cache=cache, output=tmp_path / "a.tar.gz")
    (record,) = first.report["choices"]
    with db_sessions() as s:
        (row,) = s.scalars(select(Kernel).where(Kernel.op_pattern == "choice:winograd")).all()
        assert row.binary == b"" and row.extras["choice"] == record and not row.stale
    monkeypatch.setattr(_Compilation, "_time_choice", lambda self, *_: pytest.fail("timed again"))
    again = compile_model(model, "cpu", {"threads": 1}, cache=cache, output=tmp_path / "b.tar.gz")
    assert again.report["choices"] == [record] and again.cache_misses == 0
