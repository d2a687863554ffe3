"""Kernel bundles: the kernel cache exported to a portable .tar.gz, and imported back.

A bundle holds `index.json` (format, version, the exporting compiler's fingerprint, and per
kernel its signature, tile config, numbers and the sha256 and size of its files) plus
`sources/<key>` and `binaries/<key>`. No pickles: JSON, text and bytes only.

Import never extracts to disk and trusts nothing: only those member names, regular files,
bounded sizes and counts, valid JSON of the expected shape, keys that are the hash of their
signature and files that match their sha256 are accepted; anything else refuses the whole
bundle with the reason. Kernels another compiler built, or built for a target this
installation does not build, are skipped with a message (or refuse the bundle when strict).
Everything accepted is inserted in one transaction: a bundle is imported whole or not at all.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
from server.db.kernel_cache import SIGNATURE_PARTS, entry_of, insert_kernel
from server.db.models import Kernel

FORMAT, VERSION = "tileforge-kernel-bundle", 1
INDEX = "index.json"
_MEMBER = re.compile(r"^(?:index\.json|(?:sources|binaries)/[0-9a-f]{64})$")
MAX_MEMBER_BYTES = 64 * 1024 * 1024  # a kernel's source or binary, or the index
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024
MAX_MEMBERS = 200_001  # 100,000 kernels and the index


class BundleError(Exception):
    """A bundle that cannot be exported or imported; the message says why. Nothing was written."""


@dataclass(frozen=True)
class Limits:
    """Caps on what an import reads (a hostile bundle must not exhaust memory)."""

    member_bytes: int = MAX_MEMBER_BYTES
    total_bytes: int = MAX_TOTAL_BYTES
    members: int = MAX_MEMBERS


@dataclass
class ImportReport:
    """What an import did: kernels inserted, already present, and skipped with the reasons."""

    inserted: int = 0
    present: int = 0
    skipped: list[str] = field(default_factory=list)


def export_bundle(session: Session, path: Path, target_prefix: str | None = None,
                  include_stale: bool = False) -> int:
    """Write the cache's kernels (those of one target fingerprint prefix, current ones unless
    `include_stale`) to a bundle at `path`, atomically; returns how many were written."""
    where = []
    if target_prefix:
        where.append(Kernel.target_fingerprint.startswith(target_prefix, autoescape=True))
    if not include_stale:
        where += [Kernel.stale.is_(False), Kernel.compiler_fingerprint == compiler_fingerprint()]
    kernels = []
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as e:
        raise _unwritable(path, e) from None
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            for row in session.scalars(select(Kernel).where(*where).order_by(Kernel.key)
                                       .execution_options(yield_per=200)):
                kernels.append(_describe(tar, entry_of(row)))
            _add(tar, INDEX, json.dumps({"format": FORMAT, "version": VERSION,
                                         "compiler_fingerprint": compiler_fingerprint(),
                                         "kernels": kernels}, indent=1, sort_keys=True).encode())
        os.replace(tmp, path)
    except OSError as e:
        raise _unwritable(path, e) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return len(kernels)


def _unwritable(path: Path, e: OSError) -> BundleError:
    return BundleError(f"cannot write the bundle {str(path)!r}: {e.strerror or e}")


def _describe(tar: tarfile.TarFile, entry: KernelEntry) -> dict:
    """Add a kernel's files to the bundle; its index record."""
    source, binary = entry.source.encode(), entry.binary
    _add(tar, f"sources/{entry.key}", source)
    _add(tar, f"binaries/{entry.key}", binary)
    return {"key": entry.key, "signature": {p: getattr(entry.signature, p) for p in SIGNATURE_PARTS},
            "tile_config": entry.tile_config, "te_json": entry.te_json, "estimated_us": entry.estimated_us,
            "measured_us": entry.measured_us, "validation_error": entry.validation_error, "extras": entry.extras,
            "source_sha256": hashlib.sha256(source).hexdigest(),
            "binary_sha256": hashlib.sha256(binary).hexdigest()}


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0  # no owner or time: same cache, same bytes
    tar.addfile(info, io.BytesIO(data))


def import_bundle(session: Session, path: Path, targets: Collection[str], strict: bool = False,
                  limits: Limits = Limits()) -> ImportReport:
    """Check a bundle and insert its kernels in the caller's transaction (insert-or-ignore);
    `targets` are the target fingerprints this installation builds. BundleError, with nothing
    inserted, for a damaged or hostile bundle, or (when `strict`) any kernel that would be skipped."""
    files = _read_members(path, limits)
    if INDEX not in files:
        raise BundleError(f"{INDEX} is missing: not a tileforge kernel bundle")
    entries = [_entry(n, record, files) for n, record in enumerate(_index(files[INDEX]))]
    report = ImportReport()
    ours, accepted = compiler_fingerprint(), []
    for e in entries:
        sig = e.signature
        if sig.compiler_fingerprint != ours:
            report.skipped.append(f"kernel {e.key[:12]} ({sig.op_pattern}): built by compiler "
                                  f"{sig.compiler_fingerprint}, this is {ours}")
        elif sig.target_fingerprint not in targets:
            report.skipped.append(f"kernel {e.key[:12]} ({sig.op_pattern}): target {sig.target_fingerprint} "
                                  "is not one this installation builds")
        else:
            accepted.append(e)
    if strict and report.skipped:
        raise BundleError(f"refused (strict): {len(report.skipped)} kernel(s) do not match: {report.skipped[0]}")
    for e in accepted:
        if insert_kernel(session, e):
            report.inserted += 1
        else:
            report.present += 1
    return report


def _read_members(path: Path, limits: Limits) -> dict[str, bytes]:
    """Every member's bytes by name, after checking names, kinds, sizes and counts."""
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for n, member in enumerate(tar):
                if n >= limits.members:
                    raise BundleError(f"more than {limits.members} members: refused")
                name = member.name
                if not _MEMBER.match(name):
                    raise BundleError(f"member {name[:200]!r} is not allowed (only {INDEX}, "
                                      "sources/<key> and binaries/<key>)")
                if not member.isreg():
                    raise BundleError(f"member {name!r} is not a regular file")
                if name in files:
                    raise BundleError(f"member {name!r} appears twice")
                if member.size > limits.member_bytes:
                    raise BundleError(f"member {name!r} is {member.size} bytes, over the limit of "
                                      f"{limits.member_bytes}")
                total += member.size
                if total > limits.total_bytes:
                    raise BundleError(f"members add up to more than {limits.total_bytes} bytes: refused")
                data = tar.extractfile(member).read()
                if len(data) != member.size:
                    raise BundleError(f"member {name!r} is truncated")
                files[name] = data
    except FileNotFoundError:
        raise BundleError(f"no such bundle: {str(path)!r}") from None
    except (tarfile.TarError, OSError, EOFError, ValueError) as e:
        raise BundleError(f"{str(path)!r} is not a readable .tar.gz bundle: {e}") from None
    return files


def _index(data: bytes) -> list:
    """The index's kernel records, after checking its format and version."""
    try:
        index = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise BundleError(f"{INDEX} is not valid JSON: {e}") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise BundleError(f"{INDEX} does not describe a {FORMAT}")
    if index.get("version") != VERSION:
        raise BundleError(f"bundle version {index.get('version')!r} is not supported (this reads {VERSION})")
    if not isinstance(index.get("kernels"), list):
        raise BundleError(f"{INDEX} has no kernel list")
    return index["kernels"]


_NUMBERS = ("estimated_us", "measured_us", "validation_error")


def _entry(n: int, record: object, files: dict[str, bytes]) -> KernelEntry:
    """One index record as a KernelEntry, its key and files verified."""
    where = f"{INDEX} kernel {n}"
    if not isinstance(record, dict):
        raise BundleError(f"{where} is not an object")
    sig = record.get("signature")
    if not isinstance(sig, dict) or set(sig) != set(SIGNATURE_PARTS) or \
            not all(isinstance(v, str) for v in sig.values()):
        raise BundleError(f"{where}: its signature must have exactly the string parts {list(SIGNATURE_PARTS)}")
    signature = KernelSignature(**sig)
    key = record.get("key")
    if key != signature.key:
        raise BundleError(f"{where}: key {str(key)[:80]!r} is not the hash of its signature")
    if not isinstance(record.get("tile_config"), dict) or not isinstance(record.get("extras"), dict) \
            or not isinstance(record.get("te_json"), str):
        raise BundleError(f"{where}: tile_config and extras must be objects, te_json a string")
    if not all(record.get(k) is None or type(record[k]) in (int, float) for k in _NUMBERS):
        raise BundleError(f"{where}: {', '.join(_NUMBERS)} must be numbers or null")
    source = _file(where, files, f"sources/{key}", record.get("source_sha256"))
    binary = _file(where, files, f"binaries/{key}", record.get("binary_sha256"))
    try:
        text = source.decode()
    except UnicodeDecodeError:
        raise BundleError(f"{where}: its source is not UTF-8 text") from None
    return KernelEntry(signature=signature, tile_config=record["tile_config"], source=text, binary=binary,
                       te_json=record["te_json"], extras=record["extras"],
                       **{k: record.get(k) for k in _NUMBERS})


def _file(where: str, files: dict[str, bytes], name: str, sha256: object) -> bytes:
    data = files.get(name)
    if data is None:
        raise BundleError(f"{where}: member {name!r} is missing")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise BundleError(f"{where}: member {name!r} does not match its sha256")
    return data
