import hashlib
import io

import pytest

from server.storage import BlobTooLarge, LocalStorage


def test_put_is_content_addressed_and_idempotent(tmp_path):
    storage = LocalStorage(tmp_path)
    data = b"onnx bytes" * 1000
    first = storage.put(io.BytesIO(data))
    second = storage.put(io.BytesIO(data))
    assert first == second
    assert first.sha256 == hashlib.sha256(data).hexdigest() and first.size == len(data)
    assert storage.open(first.sha256).read() == data
    assert b"".join(storage.iter_chunks(first.sha256)) == data


def test_oversized_put_leaves_nothing_behind(tmp_path):
    storage = LocalStorage(tmp_path)
    with pytest.raises(BlobTooLarge, match="limit of 10 bytes"):
        storage.put(io.BytesIO(b"x" * 11), max_bytes=10)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    blob = storage.put(io.BytesIO(b"x" * 10), max_bytes=10)
    assert storage.exists(blob.sha256)


def test_failed_write_publishes_no_partial_blob(tmp_path):
    class Broken(io.BytesIO):
        def read(self, n=-1):
            if self.tell() > 0:
                raise OSError("disk went away")
            return super().read(4)

    storage = LocalStorage(tmp_path)
    with pytest.raises(OSError):
        storage.put(Broken(b"abcdefgh"))
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_addresses_must_be_sha256(tmp_path):
    storage = LocalStorage(tmp_path)
    with pytest.raises(ValueError):
        storage.open("../../etc/passwd")
    blob = storage.put(io.BytesIO(b"a"))
    storage.delete(blob.sha256)
    assert not storage.exists(blob.sha256)
