"""Blob storage for models and artifacts: content-addressed by sha256, written atomically.

`Storage` is the interface the service uses; `LocalStorage` keeps blobs in a
folder. An S3-compatible backend would implement the same five methods (put
streams to a temporary object, then copies to the content address).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

CHUNK = 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class BlobTooLarge(Exception):
    """A blob exceeded the size cap while being written; nothing was stored."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"larger than the limit of {limit} bytes")


@dataclass(frozen=True)
class Blob:
    """A stored blob: its sha256 (which is also its address) and size in bytes."""

    sha256: str
    size: int


class Storage(Protocol):
    """Where blobs live, addressed by their sha256."""

    def put(self, source: BinaryIO, max_bytes: int | None = None) -> Blob: ...

    def open(self, sha256: str) -> BinaryIO: ...

    def iter_chunks(self, sha256: str) -> Iterator[bytes]: ...

    def exists(self, sha256: str) -> bool: ...

    def delete(self, sha256: str) -> None: ...


class LocalStorage:
    """Blobs as files `ROOT/ab/abcdef...`; a blob appears under its address only when complete."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path_of(self, sha256: str) -> Path:
        """The file of a blob (ValueError for anything but a sha256 hex digest)."""
        if not _SHA256.match(sha256):
            raise ValueError("blob addresses are sha256 hex digests")
        return self.root / sha256[:2] / sha256

    def put(self, source: BinaryIO, max_bytes: int | None = None) -> Blob:
        """Copy `source` in, hashing as it streams; BlobTooLarge past `max_bytes`."""
        digest, size = hashlib.sha256(), 0
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := source.read(CHUNK):
                    size += len(chunk)
                    if max_bytes is not None and size > max_bytes:
                        raise BlobTooLarge(max_bytes)
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            blob = Blob(digest.hexdigest(), size)
            final = self.path_of(blob.sha256)
            final.parent.mkdir(exist_ok=True)
            os.replace(tmp, final)  # same bytes under the same name: replacing is harmless
            return blob
        finally:
            Path(tmp).unlink(missing_ok=True)

    def open(self, sha256: str) -> BinaryIO:
        """The blob for reading (FileNotFoundError when absent)."""
        return self.path_of(sha256).open("rb")

    def iter_chunks(self, sha256: str) -> Iterator[bytes]:
        """The blob's bytes in chunks, for streaming responses."""
        with self.open(sha256) as f:
            while chunk := f.read(CHUNK):
                yield chunk

    def exists(self, sha256: str) -> bool:
        return self.path_of(sha256).is_file()

    def delete(self, sha256: str) -> None:
        self.path_of(sha256).unlink(missing_ok=True)
