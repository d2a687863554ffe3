"""Kernel bundles on SQLite and PostgreSQL: export and import round-trip exactly; kernels of
another compiler or target are skipped (or refuse the bundle when strict); a damaged or
hostile bundle is refused with the reason and imports nothing."""

import io
import json
import re
import tarfile
from pathlib import Path

import pytest
from sqlalchemy import func, select

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
from server.db.kernel_cache import entry_of
from server.db.models import Kernel
from server.db.session import transaction
from server.services.kernel_bundle import BundleError, Limits, export_bundle, import_bundle
from worker.kernel_cache import DatabaseKernelCache

CPU = "cpu:x86_64:0123456789abcdef"


def kernel(op: str, target: str = CPU, fingerprint: str | None = None) -> KernelEntry:
    sig = KernelSignature(op_pattern=op, shapes="[[4, 8]]", dtypes='["float32"]', te_hash="ef" * 32,
                          target_fingerprint=target, compiler_fingerprint=fingerprint or compiler_fingerprint(),
                          options='{"threads":1}')
    return KernelEntry(signature=sig, tile_config={"block": [4, 8]}, source=f"void {op.lower()}(void) {{}}\n",
                       binary=b"\x7fELF\x00" + op.encode(), te_json='{"op":"x"}', estimated_us=1.25,
                       measured_us=None, validation_error=3e-7, extras={"threads": 1})


def rows(sessions) -> dict[str, KernelEntry]:
    with sessions() as s:
        return {r.key: entry_of(r) for r in s.scalars(select(Kernel))}


def count(sessions) -> int:
    with sessions() as s:
        return s.scalar(select(func.count()).select_from(Kernel))


def import_(sessions, path: Path, targets=(CPU,), **kw):
    with transaction(sessions) as s:
        return import_bundle(s, path, set(targets), **kw)


def test_export_then_import_round_trips_exactly(db_sessions, tmp_path):
    cache = DatabaseKernelCache(db_sessions)
    entries = [kernel("MatMul"), kernel("Relu")]
    for e in entries:
        cache.put(e)
    cache.put(kernel("Old", fingerprint="0" * 16))  # stale: not exported by default
    bundle = tmp_path / "k.tar.gz"
    with db_sessions() as s:
        assert export_bundle(s, bundle) == 2
    with transaction(db_sessions) as s:
        s.execute(Kernel.__table__.delete())
    report = import_(db_sessions, bundle)
    assert (report.inserted, report.present, report.skipped) == (2, 0, [])
    assert rows(db_sessions) == {e.key: e for e in entries}
    assert import_(db_sessions, bundle).present == 2  # again: insert-or-ignore
    with tarfile.open(bundle) as tar:
        names = [m.name for m in tar]
    assert sorted(names) == sorted(["index.json", *(f"{d}/{e.key}" for e in entries for d in ("sources", "binaries"))])


def test_other_compilers_and_targets_are_skipped_or_refused_when_strict(db_sessions, tmp_path):
    cache = DatabaseKernelCache(db_sessions)
    ok, other_target, other_compiler = (kernel("Ok"), kernel("Gpu", target="cuda:sm_90:feedfacefeedface"),
                                        kernel("Old", fingerprint="0" * 16))
    for e in (ok, other_target, other_compiler):
        cache.put(e)
    bundle = tmp_path / "k.tar.gz"
    with db_sessions() as s:
        assert export_bundle(s, bundle, include_stale=True) == 3
    with transaction(db_sessions) as s:
        s.execute(Kernel.__table__.delete())
    with pytest.raises(BundleError, match="strict"):
        import_(db_sessions, bundle, strict=True)
    assert count(db_sessions) == 0
    report = import_(db_sessions, bundle)
    assert report.inserted == 1 and len(report.skipped) == 2
    assert any("built by compiler 0000000000000000" in r for r in report.skipped)
    assert any("cuda:sm_90:feedfacefeedface is not one this installation builds" in r for r in report.skipped)
    assert set(rows(db_sessions)) == {ok.key}


def _bundle(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return path


@pytest.fixture
def good_members(db_sessions, tmp_path) -> dict[str, bytes]:
    """The members of a valid two-kernel bundle (the database is left empty)."""
    cache = DatabaseKernelCache(db_sessions)
    for op in ("A", "B"):
        cache.put(kernel(op))
    with db_sessions() as s:
        export_bundle(s, tmp_path / "good.tar.gz")
    with transaction(db_sessions) as s:
        s.execute(Kernel.__table__.delete())
    with tarfile.open(tmp_path / "good.tar.gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}


def _tamper_index(members: dict[str, bytes], change) -> dict[str, bytes]:
    index = json.loads(members["index.json"])
    change(index)
    return members | {"index.json": json.dumps(index).encode()}


HOSTILE = {
    "path traversal": (lambda m: m | {"../../etc/evil": b"x"}, "'../../etc/evil' is not allowed"),
    "absolute path": (lambda m: m | {"/tmp/evil": b"x"}, "'/tmp/evil' is not allowed"),
    "bad json": (lambda m: m | {"index.json": b"{not json"}, "index.json is not valid JSON"),
    "no index": (lambda m: {k: v for k, v in m.items() if k != "index.json"}, "index.json is missing"),
    "wrong format": (lambda m: _tamper_index(m, lambda i: i.update(format="zip")), "does not describe"),
    "forged key": (lambda m: _tamper_index(m, lambda i: i["kernels"][1]["signature"].update(op_pattern="Evil")),
                   "is not the hash of its signature"),
    "changed binary": (lambda m: m | {k: b"tampered" for k in m if k.startswith("binaries/")},
                       "does not match its sha256"),
    "bad number": (lambda m: _tamper_index(m, lambda i: i["kernels"][1].update(estimated_us="fast")),
                   "must be numbers or null"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_or_damaged_bundle_is_refused_whole(db_sessions, tmp_path, good_members, case):
    change, message = HOSTILE[case]
    bundle = _bundle(tmp_path / "bad.tar.gz", change(dict(good_members)))
    with pytest.raises(BundleError, match=re.escape(message)):
        import_(db_sessions, bundle)
    assert count(db_sessions) == 0  # the valid kernel beside the bad one was not imported either


def test_links_oversize_members_and_non_bundles_are_refused(db_sessions, tmp_path, good_members):
    key = next(k for k in good_members if k.startswith("sources/")).split("/")[1]
    linked = _bundle(tmp_path / "link.tar.gz", {"index.json": good_members["index.json"]},
                     {f"sources/{key}": "/etc/passwd"})
    with pytest.raises(BundleError, match="not a regular file"):
        import_(db_sessions, linked)
    with pytest.raises(BundleError, match="over the limit of 64"):
        import_(db_sessions, _bundle(tmp_path / "good.tar.gz", good_members), limits=Limits(member_bytes=64))
    (tmp_path / "junk.tar.gz").write_bytes(b"not gzip at all")
    with pytest.raises(BundleError, match=r"not a readable \.tar\.gz bundle"):
        import_(db_sessions, tmp_path / "junk.tar.gz")
    with pytest.raises(BundleError, match="no such bundle"):
        import_(db_sessions, tmp_path / "absent.tar.gz")
    assert count(db_sessions) == 0
