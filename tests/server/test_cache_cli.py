"""`tileforge cache stats|evict|export|import` from a shell, on an embedded home: numbers as
stored, evictions as asked, a bundle that moves kernels between homes, and one-line errors
(no traceback, nothing imported) for bad input."""

import io
import json
import os
import subprocess
import sys
import tarfile

from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
from compiler.target import get_target
from server.db.migrate import upgrade
from server.db.session import make_engine, make_sessionmaker
from worker.kernel_cache import DatabaseKernelCache


def tileforge(home, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    return subprocess.run([sys.executable, "-m", "server.cli", *args], env=env | {"TILEFORGE_HOME": str(home)},
                          capture_output=True, text=True, timeout=120, check=False)


def seed(home, *kernels: tuple[str, str, int]) -> None:
    """Kernels (op, compiler fingerprint, source length) for this host's CPU target, in `home`."""
    url = f"sqlite:///{home}/tileforge.sqlite"
    upgrade(url)
    engine = make_engine(url)
    cache = DatabaseKernelCache(make_sessionmaker(engine))
    for op, fingerprint, size in kernels:
        sig = KernelSignature(op_pattern=op, shapes="[[2]]", dtypes='["float32"]', te_hash="12" * 32,
                              target_fingerprint=get_target("cpu").fingerprint(),
                              compiler_fingerprint=fingerprint, options="{}")
        cache.put(KernelEntry(sig, {"block": [2]}, "s" * size, b""))
    engine.dispose()


def stats(home) -> dict:
    done = tileforge(home, "cache", "stats", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_stats_evict_export_import_between_two_homes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    seed(a, ("MatMul", compiler_fingerprint(), 300), ("Relu", compiler_fingerprint(), 200),
         ("Old", "0" * 16, 100))
    assert stats(a)["total"] == {"rows": 3, "bytes": 600, "hits": 0, "stale": 1}
    table = tileforge(a, "cache", "stats").stdout
    assert get_target("cpu").fingerprint() in table and "all" in table

    bundle = tmp_path / "kernels.tar.gz"
    exported = tileforge(a, "cache", "export", str(bundle))
    assert exported.returncode == 0 and "exported 2 kernel(s)" in exported.stdout, exported.stderr
    imported = tileforge(b, "cache", "import", str(bundle))
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 kernel(s); 0 already present; 0 skipped" in imported.stdout
    assert stats(b)["total"] == {"rows": 2, "bytes": 500, "hits": 0, "stale": 0}

    evicted = tileforge(a, "cache", "evict", "--stale", "--to-bytes", "300")
    # the stale row (100 bytes), then the least recently used (MatMul, stored first: 300 bytes)
    assert evicted.returncode == 0 and "evicted 2 kernel(s), 400 bytes" in evicted.stdout
    assert stats(a)["total"] == {"rows": 1, "bytes": 200, "hits": 0, "stale": 0}
    assert tileforge(a, "cache", "evict", "--older-than", "7d").stdout.startswith("evicted 0 kernel(s)")


def test_bad_input_is_one_line_and_imports_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        info = tarfile.TarInfo("../../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    for args, message in [
        (("cache", "import", str(evil)), "error: member '../../escape' is not allowed"),
        (("cache", "import", str(tmp_path / "absent.tar.gz")), "error: no such bundle"),
        (("cache", "evict"), "error: say what to evict"),
        (("cache", "evict", "--older-than", "soon"), "is not a duration"),
        (("cache", "export", str(tmp_path / "no-such-dir" / "k.tar.gz")), "error: cannot write the bundle"),
    ]:
        done = tileforge(home, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    assert stats(home)["total"]["rows"] == 0
    assert not (tmp_path / "escape").exists()
