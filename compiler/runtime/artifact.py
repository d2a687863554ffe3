"""The artifact: a .tar.gz of manifest.json, generated sources, the binary, weights and report.

`manifest.json` records what is needed to run and to trust the rest: format
version, target and toolchain, compiler version and fingerprint, inputs and
outputs (names, shapes, dtypes), buffers, launches (waves of kernel symbols),
each kernel's cache key and tiling, and the sha256 of every other member and
of the source model. Writing is deterministic and atomic; reading never
trusts the archive: only expected regular files, no paths outside the folder,
size caps, and every file's hash checked against the manifest.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from compiler.cache import compiler_fingerprint
from compiler.errors import ArtifactError
from compiler.schedule.plan import BufferKind, ExecutionPlan

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
REPORT = "report.json"
# Every member an artifact may hold; anything else is refused on read.
MEMBER_NAME = re.compile(r"manifest\.json|report\.json|weights\.bin|model\.(so|cubin|ptx|fatbin)"
                         r"|src/[A-Za-z0-9_]{1,64}\.(c|cu|h)")
MAX_MEMBERS = 10_000
# ONNX models without external data stay under 2 GiB, and so do their weights.
MAX_MEMBER_BYTES = 4 << 30
MAX_TOTAL_BYTES = 6 << 30
MAX_JSON_BYTES = 64 << 20
# Keys the caller supplies (pipeline): what the plan does not know.
REQUIRED_EXTRA = ("target", "target_kind", "toolchain", "model_sha256")
_CHUNK = 1 << 20
STORE_ABOVE = 16 << 20  # bytes of members past which the archive is not deflated


def write_artifact(
    path: str | Path, plan: ExecutionPlan, files: Mapping[str, bytes],
    manifest_extra: Mapping[str, Any], report: Mapping[str, Any],
) -> str:
    """Write the artifact for `plan` atomically at `path`; returns the tarball's sha256.

    `files` maps member names (src/*.c, model.so, weights.bin, ...) to bytes;
    `manifest_extra` must hold REQUIRED_EXTRA and may add other JSON-able keys.
    """
    for name in files:
        if name in (MANIFEST, REPORT) or not MEMBER_NAME.fullmatch(name):
            raise ValueError(f"not an artifact member name: {name!r}")
    members = {**files, REPORT: _json_bytes(report)}
    manifest = manifest_of(plan, manifest_extra)
    manifest["files"] = {n: hashlib.sha256(d).hexdigest() for n, d in sorted(members.items())}
    members[MANIFEST] = _json_bytes(manifest)

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-artifact-")
    try:
        with os.fdopen(fd, "wb") as raw:
            _write_tar(raw, members)
        digest = _sha256_file(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return digest


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


def _write_tar(raw: BinaryIO, members: Mapping[str, bytes]) -> None:
    """A reproducible tar.gz: fixed order, times, owners and modes (same inputs, same sha256).

    Above STORE_ABOVE bytes the gzip stream stores its blocks instead of deflating them:
    what makes an artifact big is its weights, float noise that deflate shrinks by 7% at
    best, at about 25 MB/s (5.5 s of a 113 MB model's 11 s compile went to it)."""
    level = 0 if sum(len(b) for b in members.values()) > STORE_ABOVE else 9
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=level) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in [MANIFEST, *sorted(n for n in members if n != MANIFEST)]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(members[name]))


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def read_artifact(path: str | Path, parent: str | Path | None = None) -> tuple[dict[str, Any], Path]:
    """Verify and extract an artifact into a new folder (under `parent`); returns (manifest, folder).

    The caller owns the folder. Anything malformed or tampered with raises
    ArtifactError naming the problem, and leaves nothing behind.
    """
    folder = Path(tempfile.mkdtemp(prefix="tileforge-artifact-", dir=parent))
    try:
        hashes = _extract(Path(path), folder)
        manifest = _load_json(folder / MANIFEST, MANIFEST)
        _check_manifest(manifest, hashes)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return manifest, folder


def _extract(path: Path, folder: Path) -> dict[str, str]:
    """Stream every member to `folder` after checking it; returns member name -> sha256."""
    hashes: dict[str, str] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for m in tar:
                if len(hashes) >= MAX_MEMBERS:
                    raise ArtifactError(f"artifact has more than {MAX_MEMBERS} members")
                if not m.isreg():
                    raise ArtifactError(f"artifact member {m.name!r} is not a regular file")
                if not MEMBER_NAME.fullmatch(m.name):
                    raise ArtifactError(f"unexpected artifact member {m.name!r}")
                if m.name in hashes:
                    raise ArtifactError(f"artifact member {m.name!r} appears twice")
                total += m.size
                if m.size > MAX_MEMBER_BYTES or total > MAX_TOTAL_BYTES:
                    raise ArtifactError(f"artifact member {m.name!r} exceeds the size limits")
                hashes[m.name] = _copy_member(tar, m, folder / m.name)
    except FileNotFoundError as e:
        raise ArtifactError(f"no artifact at {path}") from e
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise ArtifactError(f"artifact is not a readable .tar.gz: {e}") from e
    return hashes


def _copy_member(tar: tarfile.TarFile, m: tarfile.TarInfo, dest: Path) -> str:
    src = tar.extractfile(m)
    if src is None:
        raise ArtifactError(f"artifact member {m.name!r} has no data")
    dest.parent.mkdir(exist_ok=True)
    h = hashlib.sha256()
    with dest.open("xb") as out:  # "x": never follow or overwrite anything already there
        while chunk := src.read(_CHUNK):
            h.update(chunk)
            out.write(chunk)
    return h.hexdigest()


def _load_json(path: Path, what: str) -> Any:
    if not path.exists():
        raise ArtifactError(f"artifact has no {what}")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ArtifactError(f"artifact's {what} is too large")
    try:
        return json.loads(path.read_bytes())
    except ValueError as e:
        raise ArtifactError(f"artifact's {what} is not valid JSON: {e}") from e


def _check_manifest(manifest: Any, hashes: Mapping[str, str]) -> None:
    """The manifest is ours, of a version we read, and every file matches its recorded hash."""
    if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
        version = manifest.get("format_version") if isinstance(manifest, dict) else None
        raise ArtifactError(f"unsupported artifact format version {version!r} "
                            f"(this runtime reads {FORMAT_VERSION})")
    recorded = manifest.get("files")
    if not isinstance(recorded, dict):
        raise ArtifactError("artifact manifest lists no file hashes")
    present = set(hashes) - {MANIFEST}
    missing, extra = sorted(set(recorded) - present), sorted(present - set(recorded))
    if missing:
        raise ArtifactError(f"artifact lacks files its manifest lists: {missing}")
    if extra:
        raise ArtifactError(f"artifact holds files its manifest does not list: {extra}")
    for name in sorted(present):
        if recorded[name] != hashes[name]:
            raise ArtifactError(f"artifact file {name!r} does not match its sha256 in the manifest "
                                "(tampered or corrupted)")
