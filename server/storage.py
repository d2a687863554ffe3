"""Blob storage for models and artifacts: content-addressed by sha256, written atomically.

`Storage` is the interface the service uses; `LocalStorage` keeps blobs in a
folder. An S3-compatible backend would implement the same methods (put
streams to a temporary object, then copies to the content address; listing
pages through the bucket).
"""

from __future__ import annotations

import errno
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
_INCOMING = ".incoming-"  # prefix of a blob being written


class BlobTooLarge(Exception):
    """A blob exceeded the size cap while being written; nothing was stored."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"larger than the limit of {limit} bytes")


class StorageFull(Exception):
    """The store has no room for a blob (no space left, or over a quota); nothing was stored."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the blob store is full ({reason}); nothing was stored")


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@dataclass(frozen=True)
class Blob:
    """A stored blob: its sha256 (which is also its address) and size in bytes."""

    sha256: str
    size: int


@dataclass(frozen=True)
class StoredFile:
    """A file in the store as listed for clean-up: a blob (`sha256` set) or the temporary file
    of a write that never finished (`sha256` None), with when it was last written."""

    name: str  # the store's own name for it
    sha256: str | None
    modified: float  # seconds since the epoch


class Storage(Protocol):
    """Where blobs live, addressed by their sha256."""

    def put(self, source: BinaryIO, max_bytes: int | None = None) -> Blob: ...

    def open(self, sha256: str) -> BinaryIO: ...

    def iter_chunks(self, sha256: str) -> Iterator[bytes]: ...

    def exists(self, sha256: str) -> bool: ...

    def delete(self, sha256: str) -> None: ...

    def list_files(self) -> Iterator[StoredFile]: ...

    def delete_file(self, file: StoredFile) -> None: ...


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
        """Copy `source` in, hashing as it streams; BlobTooLarge past `max_bytes`, StorageFull
        when the disk is; either way no part of the blob is left."""
        try:
            return self._put(source, max_bytes)
        except OSError as e:
            if e.errno in _FULL:
                raise StorageFull(e.strerror or str(e)) from None
            raise

    def _put(self, source: BinaryIO, max_bytes: int | None) -> Blob:
        digest, size = hashlib.sha256(), 0
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=_INCOMING)
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

    def list_files(self) -> Iterator[StoredFile]:
        """Every blob, and every temporary file a crashed write left behind."""
        for path in self.root.glob(f"{_INCOMING}*"):
            yield StoredFile(path.name, None, _modified(path))
        for path in self.root.glob("??/*"):
            if _SHA256.match(path.name) and path.parent.name == path.name[:2]:
                yield StoredFile(f"{path.parent.name}/{path.name}", path.name, _modified(path))

    def delete_file(self, file: StoredFile) -> None:
        """Delete a listed file unless it was written again since it was listed (the same
        bytes uploaded anew, say)."""
        if file.sha256 is not None:
            path = self.path_of(file.sha256)
            if _modified(path) <= file.modified:
                path.unlink(missing_ok=True)
        elif file.name.startswith(_INCOMING) and "/" not in file.name:
            (self.root / file.name).unlink(missing_ok=True)
        else:
            raise ValueError(f"not a file of this store: {file.name!r}")


def _modified(path: Path) -> float:
    """When `path` was last written; +inf when it vanished meanwhile (never old enough to sweep)."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return float("inf")
