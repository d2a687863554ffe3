"""Kernel keys and the file-backed cache."""

import threading

from compiler.cache import FileKernelCache, KernelEntry, MemoryKernelCache, signature_of
from compiler.ir.te import Axis, Compute, Load, TensorType, Var, call


def relu(n: int) -> Compute:
    x = Load(0, (Var("i0"),), "float32")
    return Compute((Axis("i0", n),), call("max", x, 0.0), (TensorType((n,), "float32"),), "float32",
                   label="Relu")


def entry(c: Compute, source: str = "src") -> KernelEntry:
    return KernelEntry(signature_of(c, "cpu:test:0"), {"block": [8]}, source, b"\x7fELF")


def test_key_depends_on_te_target_and_options_not_on_identity():
    a, b = signature_of(relu(8), "cpu:x:1"), signature_of(relu(8), "cpu:x:1")
    assert a.key == b.key and len(a.key) == 64
    assert signature_of(relu(9), "cpu:x:1").key != a.key
    assert signature_of(relu(8), "cpu:y:1").key != a.key
    assert signature_of(relu(8), "cpu:x:1", {"o": 1}).key != a.key
    assert a.op_pattern == "Relu" and a.shapes == "[[8], [8]]"


def test_file_cache_round_trips_and_first_writer_wins(tmp_path):
    cache = FileKernelCache(tmp_path)
    e = entry(relu(8), "first")
    assert cache.get(e.signature) is None
    cache.put(e)
    cache.put(entry(relu(8), "second"))
    got = cache.get(e.signature)
    assert got is not None and got.source == "first" and got.binary == b"\x7fELF"
    assert got.signature == e.signature


def test_concurrent_puts_store_one_complete_entry(tmp_path):
    cache = FileKernelCache(tmp_path)
    entries = [entry(relu(16), f"s{i}") for i in range(8)]
    threads = [threading.Thread(target=cache.put, args=(e,)) for e in entries]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = cache.get(entries[0].signature)
    assert got is not None and got.source in {e.source for e in entries}
    assert not list(tmp_path.rglob(".tmp-*"))


def test_damaged_entry_is_a_miss(tmp_path):
    cache = FileKernelCache(tmp_path)
    e = entry(relu(4))
    cache.put(e)
    next(tmp_path.rglob("*.json")).write_text("{not json")
    assert cache.get(e.signature) is None


def test_memory_cache():
    cache = MemoryKernelCache()
    e = entry(relu(4))
    cache.put(e)
    assert cache.get(e.signature) is e


def test_a_key_collision_is_a_miss_in_memory_and_in_files(tmp_path):
    """An entry stored under the key of another signature (a forged sha256 collision) is not
    returned for that signature: both caches compare the whole signature."""
    stored, wanted = entry(relu(4)), entry(relu(5))
    forged = KernelEntry(stored.signature, stored.tile_config, stored.source, stored.binary)
    memory = MemoryKernelCache()
    memory._d[wanted.key] = forged  # what a collision would leave under wanted's key
    assert memory.get(wanted.signature) is None
    files = FileKernelCache(tmp_path)
    files.put(stored)
    meta = next(tmp_path.rglob("*.json"))
    target = tmp_path / wanted.key[:2]
    target.mkdir(exist_ok=True)
    meta.rename(target / f"{wanted.key}.json")
    meta.with_suffix(".bin").rename(target / f"{wanted.key}.bin")
    assert files.get(wanted.signature) is None
    assert files.get(stored.signature) is None  # moved away: nothing under its own key now
