"""The artifact format: deterministic atomic writes, safe verified reads, tampering refused."""

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from handbuilt import EXTRA, graph, whole

from compiler import package
from compiler.cache import compiler_fingerprint
from compiler.errors import ArtifactError
from compiler.package import write_artifact
from compiler.runtime import artifact
from compiler.runtime.artifact import FORMAT_VERSION, read_artifact
from compiler.schedule.planner import build_plan, weights_blob

PLAN_GRAPH = graph()
PLAN = build_plan(PLAN_GRAPH, "cpu:test:0", whole)
FILES = {"src/entry.c": b"int tf_run;", "model.so": b"\x7fELF not really", "weights.bin": weights_blob(PLAN_GRAPH, PLAN)}


def write(path: Path, **overrides) -> str:
    args = {"plan": PLAN, "files": FILES, "manifest_extra": EXTRA, "report": {"ok": True}} | overrides
    return write_artifact(path, **args)


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def pack(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    """A hand-made (possibly hostile) tar.gz."""
    with tarfile.open(path, "w:gz") as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def repack(src: Path, dst: Path, change: dict[str, bytes | None]) -> Path:
    """`src` with members replaced (bytes), added (new name) or removed (None)."""
    files = {**members(src), **change}
    return pack(dst, [(tarfile.TarInfo(n), d) for n, d in files.items() if d is not None])


def test_round_trip_manifest_and_files(tmp_path: Path):
    path = tmp_path / "a.tar.gz"
    sha = write(path)
    assert sha == hashlib.sha256(path.read_bytes()).hexdigest()
    manifest, folder = read_artifact(path, tmp_path)
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["target_kind"] == "cpu" and manifest["target_fingerprint"] == "cpu:test:0"
    assert manifest["compiler_fingerprint"] == compiler_fingerprint()
    assert manifest["model_sha256"] == "0" * 64 and manifest["toolchain"] == "gcc test"
    assert [i["name"] for i in manifest["inputs"]] == ["x"]
    assert [(o["name"], o["shape"]) for o in manifest["outputs"]] == [("y:relu", [2, 4]), ("z/exp", [8])]
    symbols = {k.id: k.symbol for k in PLAN.kernels}
    assert manifest["launches"] == [[symbols[k] for k in w] for w in PLAN.waves]
    assert [k["key"] for k in manifest["kernels"]] == [k.key for k in PLAN.kernels]
    assert manifest["kernels"][0]["tile"] == PLAN.kernels[0].tile.to_json()
    assert set(manifest["files"]) == {*FILES, "report.json"}
    for name, data in FILES.items():
        assert (folder / name).read_bytes() == data
    assert json.loads((folder / "report.json").read_text()) == {"ok": True}


def test_writes_are_reproducible_and_leave_no_temporaries(tmp_path: Path):
    assert write(tmp_path / "a.tar.gz") == write(tmp_path / "b.tar.gz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "b.tar.gz"]


def test_big_artifacts_are_stored_not_deflated_and_still_round_trip(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(package, "STORE_ABOVE", 1 << 16)
    blob = bytes(1 << 17)  # zeros: deflate would shrink them to almost nothing
    files = {**FILES, "src/big.c": blob}
    small, big = tmp_path / "small.tar.gz", tmp_path / "big.tar.gz"
    write(small)
    sha = write(big, files=files)
    assert big.stat().st_size > len(blob) > 10 * small.stat().st_size  # stored blocks
    assert sha == write(tmp_path / "again.tar.gz", files=files)  # still reproducible
    _, folder = read_artifact(big, tmp_path)
    assert (folder / "src/big.c").read_bytes() == blob


def test_bad_member_names_and_missing_manifest_keys_are_refused_on_write(tmp_path: Path):
    with pytest.raises(ValueError, match="member name"):
        write(tmp_path / "a.tar.gz", files={**FILES, "../evil.c": b""})
    with pytest.raises(ValueError, match="member name"):
        write(tmp_path / "a.tar.gz", files={**FILES, "report.json": b"{}"})
    with pytest.raises(ValueError, match="lacks"):
        write(tmp_path / "a.tar.gz", manifest_extra={"target": "cpu"})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("change", "message"), [
    ({"weights.bin": b"\0" * 192}, "weights.bin.*does not match its sha256"),
    ({"model.so": None}, "lacks files"),
    ({"src/extra.c": b"int x;"}, "does not list"),
    ({"manifest.json": None}, "no manifest"),
    ({"manifest.json": b"{not json"}, "not valid JSON"),
])
def test_tampered_artifacts_are_refused(tmp_path: Path, change, message):
    good = tmp_path / "good.tar.gz"
    write(good)
    bad = repack(good, tmp_path / "bad.tar.gz", change)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ArtifactError, match=message):
        read_artifact(bad, out)
    assert list(out.iterdir()) == []  # nothing left behind


def test_other_format_versions_are_refused(tmp_path: Path):
    good = tmp_path / "good.tar.gz"
    write(good)
    manifest = json.loads(members(good)["manifest.json"])
    manifest["format_version"] = 99
    bad = repack(good, tmp_path / "bad.tar.gz", {"manifest.json": json.dumps(manifest).encode()})
    with pytest.raises(ArtifactError, match="format version 99"):
        read_artifact(bad, tmp_path)


def hostile(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(("entry", "message"), [
    ((hostile("../escape.c"), b"x"), "unexpected artifact member"),
    ((hostile("/etc/cron.d/x"), b"x"), "unexpected artifact member"),
    ((hostile("src/../../x.c"), b"x"), "unexpected artifact member"),
    ((hostile("model.so", tarfile.SYMTYPE, "/etc/passwd"), None), "not a regular file"),
    ((hostile("weights.bin", tarfile.LNKTYPE, "model.so"), None), "not a regular file"),
    ((hostile("src", tarfile.DIRTYPE), None), "not a regular file"),
])
def test_unsafe_members_are_refused_before_extraction(tmp_path: Path, entry, message):
    bad = pack(tmp_path / "bad.tar.gz", [entry])
    with pytest.raises(ArtifactError, match=message):
        read_artifact(bad, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tar.gz"]


def test_size_caps_are_enforced_from_the_headers(tmp_path: Path, monkeypatch):
    good = tmp_path / "good.tar.gz"
    write(good)
    monkeypatch.setattr(artifact, "MAX_MEMBER_BYTES", 100)
    with pytest.raises(ArtifactError, match="size limits"):
        read_artifact(good, tmp_path)
    monkeypatch.setattr(artifact, "MAX_MEMBER_BYTES", 1 << 20)
    monkeypatch.setattr(artifact, "MAX_TOTAL_BYTES", 1000)
    with pytest.raises(ArtifactError, match="size limits"):
        read_artifact(good, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.tar.gz"]


def test_duplicate_members_and_garbage_are_refused(tmp_path: Path):
    dup = pack(tmp_path / "dup.tar.gz", [(hostile("model.so"), b"a"), (hostile("model.so"), b"b")])
    with pytest.raises(ArtifactError, match="twice"):
        read_artifact(dup, tmp_path)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not gzip" * 10)
    with pytest.raises(ArtifactError, match="not a readable"):
        read_artifact(junk, tmp_path)
    with pytest.raises(ArtifactError, match="no artifact"):
        read_artifact(tmp_path / "missing.tar.gz", tmp_path)
