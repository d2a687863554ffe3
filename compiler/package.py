"""Writing artifacts (the pipeline's `package` stage): the plan's manifest, the files, the
report, as one reproducible .tar.gz written atomically. The format and its limits are the
reader's, compiler/runtime/artifact.py; this module is above the scheduler, which the
runtime never imports.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import json
import os
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from compiler.cache import compiler_fingerprint
from compiler.runtime.artifact import CHUNK, FORMAT_VERSION, MANIFEST, MEMBER_NAME, REPORT
from compiler.schedule.plan import BufferKind, ExecutionPlan

# Keys the caller supplies (pipeline): what the plan does not know.
REQUIRED_EXTRA = ("target", "target_kind", "toolchain", "model_sha256")
STORE_ABOVE = 16 << 20  # bytes of members past which the archive is not deflated


def write_artifact(
    path: str | Path, plan: ExecutionPlan, files: Mapping[str, bytes | memoryview],
    manifest_extra: Mapping[str, Any], report: Mapping[str, Any], hashed: Mapping[str, str] | None = None,
) -> str:
    """Write the artifact for `plan` atomically at `path`; returns the tarball's sha256.

    `files` maps member names (src/*.c, model.so, weights.bin, ...) to bytes;
    `manifest_extra` must hold REQUIRED_EXTRA and may add other JSON-able keys;
    `hashed`, the sha256 hex digests of members the caller has hashed already (the
    pipeline hashes the weights while it validates).
    """
    for name in files:
        if name in (MANIFEST, REPORT) or not MEMBER_NAME.fullmatch(name):
            raise ValueError(f"not an artifact member name: {name!r}")
    members = {**files, REPORT: _json_bytes(report)}
    manifest = manifest_of(plan, manifest_extra)
    known = hashed or {}
    manifest["files"] = {n: known[n] if n in known else hashlib.sha256(d).hexdigest()
                         for n, d in sorted(members.items())}
    members[MANIFEST] = _json_bytes(manifest)

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-artifact-")
    try:
        with os.fdopen(fd, "wb") as raw:
            sink = _HashingWriter(raw)
            _write_tar(sink, members)
        digest = sink.sha256.hexdigest()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return digest


def write_unpacked(folder: Path, files: Mapping[str, bytes | memoryview]) -> None:
    """`files` (artifact member names to bytes) written under `folder` as an extracted
    artifact lies: what the runtime loads (compiler.runtime.load_folder) without a tarball."""
    for name, data in files.items():
        if not MEMBER_NAME.fullmatch(name):
            raise ValueError(f"not an artifact member name: {name!r}")
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_bytes(data)


def manifest_of(plan: ExecutionPlan, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's description of a plan, merged with the caller's keys (no file hashes)."""
    missing = [k for k in REQUIRED_EXTRA if k not in extra]
    if missing:
        raise ValueError(f"manifest_extra lacks {missing}")
    if extra.get("target_fingerprint", plan.target) != plan.target:
        raise ValueError("manifest_extra's target_fingerprint differs from the plan's")
    symbols = {k.id: k.symbol for k in plan.kernels}
    own: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "target_fingerprint": plan.target,
        "compiler_version": _compiler_version(),
        "compiler_fingerprint": compiler_fingerprint(),
        "inputs": [_io_entry(plan, b) for b in plan.inputs],
        "outputs": [_io_entry(plan, b) for b in plan.outputs],
        "buffers": [{"id": b.id, "kind": str(b.kind), "shape": list(b.shape), "dtype": b.dtype,
                     "nbytes": b.nbytes, "offset": b.offset}
                    for b in sorted(plan.buffers.values(), key=lambda b: b.id)],
        "arena_bytes": plan.arena_bytes,
        "weights_bytes": plan.weights_bytes,
        "launches": [[symbols[k] for k in wave] for wave in plan.waves],
        "kernels": [{"id": k.id, "symbol": k.symbol, "key": k.key, "ops": list(k.ops),
                     "label": k.compute.label, "tile": k.tile.to_json(), "args": list(k.args)}
                    for k in plan.kernels],
    }
    clash = sorted(set(own) & set(extra) - {"target_fingerprint"})
    if clash:
        raise ValueError(f"manifest_extra may not set {clash}")
    return {**dict(extra), **own}


def _io_entry(plan: ExecutionPlan, buffer_id: int) -> dict[str, Any]:
    b = plan.buffers[buffer_id]
    if b.kind not in (BufferKind.INPUT, BufferKind.OUTPUT):
        raise ValueError(f"buffer {b.id} is listed as model I/O but is {b.kind}")
    return {"name": b.name, "shape": list(b.shape), "dtype": b.dtype, "buffer": b.id}


def _compiler_version() -> str:
    try:
        return importlib.metadata.version("tileforge")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, indent=1).encode()


def _write_tar(raw: BinaryIO | _HashingWriter, members: Mapping[str, bytes | memoryview]) -> None:
    """A reproducible tar.gz: fixed order, times, owners and modes (same inputs, same sha256).

    Above STORE_ABOVE bytes the gzip stream stores its blocks instead of deflating them:
    what makes an artifact big is its weights, float noise that deflate shrinks by 7% at
    best, at about 25 MB/s (5.5 s of a 113 MB model's 11 s compile went to it)."""
    level = 0 if sum(len(b) for b in members.values()) > STORE_ABOVE else 9
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=level) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.copybufsize = CHUNK  # not tarfile's 16 KB: a 209 MB member in 200 writes, not 13,000
        for name in [MANIFEST, *sorted(n for n in members if n != MANIFEST)]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tar.addfile(info, _Reader(members[name]))


class _Reader:
    """A binary file's `read` over bytes in memory, without BytesIO's copy of them."""

    def __init__(self, data: bytes | memoryview) -> None:
        self.view, self.at = memoryview(data), 0

    def read(self, n: int) -> memoryview:
        self.at += n
        return self.view[self.at - n:self.at]


class _HashingWriter:
    """A binary file's `write` and `flush` that hash what goes through: the tarball's sha256
    as it is written, not read back (0.3 s of a 209 MB model's packing)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.sha256 = raw, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()
