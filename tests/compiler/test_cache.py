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
    assert cache.get(e.key) is None
    cache.put(e)
    cache.put(entry(relu(8), "second"))
    got = cache.get(e.key)
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
    got = cache.get(entries[0].key)
    assert got is not None and got.source in {e.source for e in entries}
    assert not list(tmp_path.rglob(".tmp-*"))


def test_damaged_entry_is_a_miss(tmp_path):
    cache = FileKernelCache(tmp_path)
    e = entry(relu(4))
    cache.put(e)
    next(tmp_path.rglob("*.json")).write_text("{not json")
    assert cache.get(e.key) is None


def test_memory_cache():
    cache = MemoryKernelCache()
    e = entry(relu(4))
    cache.put(e)
    assert cache.get(e.key) is e
