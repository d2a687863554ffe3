"""Kernel signatures and the KernelCache protocol.

A kernel's key is sha256 over a canonical serialization of: the fused group's
TE (shapes, dtypes, index maps, attributes; never weight values), the target
fingerprint, the codegen options, and the compiler's own fingerprint (a hash
of its source). Each part is also kept on its own so a database can filter by it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from compiler.ir.te import Compute


@functools.cache
def compiler_fingerprint() -> str:
    """sha256 of the compiler package's own source: any change to it makes old kernels stale."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class KernelSignature:
    """The parts of a kernel key, each filterable on its own."""

    op_pattern: str
    shapes: str
    dtypes: str
    te_hash: str
    target_fingerprint: str
    compiler_fingerprint: str
    options: str

    @property
    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def signature_of(compute: Compute, target_fingerprint: str, options: dict | None = None,
                 tuned: bool = False) -> KernelSignature:
    """The signature of one kernel for one target under the given codegen options, as a
    compile that timed its candidates (`tuned`, `options_key`) or one that did not makes it."""
    canonical = compute.canonical()
    shapes = json.dumps([list(t.shape) for t in compute.inputs] + [list(compute.shape)])
    dtypes = json.dumps(sorted({t.dtype for t in compute.inputs} | {compute.dtype}))
    return KernelSignature(
        op_pattern=compute.label or "Compute",
        shapes=shapes,
        dtypes=dtypes,
        te_hash=hashlib.sha256(canonical.encode()).hexdigest(),
        target_fingerprint=target_fingerprint,
        compiler_fingerprint=compiler_fingerprint(),
        options=options_key(options, tuned),
    )


def choice_signature(kind: str, key: str, target_fingerprint: str, options: dict | None = None) -> KernelSignature:
    """The signature under which the answer to a lowering choice is kept beside the kernels
    (compiler/pipeline.py `choose`): the op's signature `key` (shapes and attributes, never
    weight values) in place of a TE, keyed like a kernel by target, compiler and options."""
    return KernelSignature(
        op_pattern=f"choice:{kind}",
        shapes=key,
        dtypes="",
        te_hash=hashlib.sha256(key.encode()).hexdigest(),
        target_fingerprint=target_fingerprint,
        compiler_fingerprint=compiler_fingerprint(),
        options=options_key(options),
    )


def options_key(options: dict | None, tuned: bool = False) -> str:
    """A signature's options: `options`, and whether a compile that timed candidates on the
    device made the entry (`tuned`). Tuned and untuned entries are kept apart: the cache's
    first writer wins, and an untuned kernel (a compile with measuring off, or for another
    machine) found by a measuring compile was never timed again, nor its groups re-weighed."""
    return json.dumps({**(options or {}), **({"tuned": True} if tuned else {})}, sort_keys=True, separators=(",", ":"))


@dataclass
class KernelEntry:
    """A compiled kernel as the cache stores it."""

    signature: KernelSignature
    tile_config: dict
    source: str
    binary: bytes  # object file (CPU) or cubin (CUDA)
    te_json: str = ""  # the canonical Compute, for people and tools
    estimated_us: float | None = None
    measured_us: float | None = None
    validation_error: float | None = None
    extras: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.signature.key

    @property
    def size_bytes(self) -> int:
        """Bytes the entry holds (source, binary, TE): what a size-capped cache counts."""
        return len(self.source.encode()) + len(self.binary) + len(self.te_json.encode())


def exact_hit(entry: KernelEntry | None, signature: KernelSignature) -> KernelEntry | None:
    """`entry` when it was built for exactly `signature`, else None: a key is only a hash of the
    signature, so a stored entry under the same key with another signature is a collision, a miss."""
    return entry if entry is not None and entry.signature == signature else None


class KernelCache(Protocol):
    """Where compiled kernels are kept, looked up by their whole signature (not only its hash).
    `put` is idempotent: the first writer of a key wins."""

    def get(self, signature: KernelSignature) -> KernelEntry | None: ...

    def put(self, entry: KernelEntry) -> None: ...


class MemoryKernelCache:
    """A process-local cache (tests, one-off compiles)."""

    def __init__(self) -> None:
        self._d: dict[str, KernelEntry] = {}

    def get(self, signature: KernelSignature) -> KernelEntry | None:
        return exact_hit(self._d.get(signature.key), signature)

    def put(self, entry: KernelEntry) -> None:
        self._d.setdefault(entry.key, entry)

    def entries(self) -> dict[str, KernelEntry]:
        """Every stored entry by key (a copy)."""
        return dict(self._d)


class FileKernelCache:
    """A cache in a folder: one JSON file + one binary per key, written atomically."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _paths(self, key: str) -> tuple[Path, Path]:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError("kernel keys are sha256 hex digests")
        d = self.root / key[:2]
        return d / f"{key}.json", d / f"{key}.bin"

    def get(self, signature: KernelSignature) -> KernelEntry | None:
        meta, binf = self._paths(signature.key)
        if not meta.exists() or not binf.exists():
            return None
        try:
            j = json.loads(meta.read_text())
            j["signature"] = KernelSignature(**j["signature"])
            return exact_hit(KernelEntry(binary=binf.read_bytes(), **j), signature)
        except (ValueError, TypeError, KeyError):
            return None  # a damaged entry is a miss, never an error

    def put(self, entry: KernelEntry) -> None:
        meta, binf = self._paths(entry.key)
        if meta.exists():
            return
        meta.parent.mkdir(parents=True, exist_ok=True)
        j = asdict(entry)
        j.pop("binary")
        _atomic_write(binf, entry.binary)
        _atomic_write(meta, json.dumps(j, sort_keys=True).encode())  # meta last: marks completeness


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
