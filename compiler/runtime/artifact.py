"""Reading artifacts: a .tar.gz of manifest.json, generated sources, the binary, weights
and report (compiler/package.py writes them, at the pipeline level).

`manifest.json` records what is needed to run and to trust the rest: format
version, target and toolchain, compiler version and fingerprint, inputs and
outputs (names, shapes, dtypes), buffers, launches (waves of kernel symbols),
each kernel's cache key and tiling, and the sha256 of every other member and
of the source model. Reading never trusts the archive: only expected regular
files, no paths outside the folder, size caps, and every file's hash checked
against the manifest.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from compiler.errors import ArtifactError

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
REPORT = "report.json"
WEIGHTS = "weights.bin"  # every target's weights, one blob at the manifest's offsets
# Every member an artifact may hold; anything else is refused on read.
MEMBER_NAME = re.compile(r"manifest\.json|report\.json|weights\.bin|model\.(so|cubin|ptx|fatbin)"
                         r"|src/[A-Za-z0-9_]{1,64}\.(c|cu|h)")
MAX_MEMBERS = 10_000
# ONNX models without external data stay under 2 GiB, and so do their weights.
MAX_MEMBER_BYTES = 4 << 30
MAX_TOTAL_BYTES = 6 << 30
MAX_JSON_BYTES = 64 << 20
CHUNK = 1 << 20  # bytes hashed or copied at a time


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
        while chunk := src.read(CHUNK):
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


def peek_manifest(source: BinaryIO) -> dict[str, Any]:
    """The manifest of an artifact read as a stream (it is the archive's first member), without
    extracting or checking the rest: for a service that only needs an artifact's input and
    output specs of an artifact it stored itself. Anything else raises ArtifactError."""
    try:
        with tarfile.open(fileobj=source, mode="r|gz") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST or not first.isreg():
                raise ArtifactError(f"artifact does not start with its {MANIFEST}")
            if first.size > MAX_JSON_BYTES:
                raise ArtifactError(f"artifact's {MANIFEST} is too large")
            data = tar.extractfile(first)
            manifest = json.loads(data.read()) if data is not None else None
    except (tarfile.TarError, EOFError, OSError, zlib.error, ValueError) as e:
        raise ArtifactError(f"artifact's {MANIFEST} cannot be read: {e}") from e
    if not isinstance(manifest, dict):
        raise ArtifactError(f"artifact's {MANIFEST} is not an object")
    return manifest
