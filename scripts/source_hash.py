"""Prints a sha256 over the generated sources of every zoo model, for a fixed CPU model and
a CUDA preset: a refactoring that means to change no generated code must leave it as it was.

    .venv/bin/python scripts/source_hash.py          # one line per model and target, then the total

Named targets make the plan independent of this host (fixed caches; two threads); nothing
is timed or validated, so the tiles are the cost model's first choice everywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.bench.models import ZOO
from compiler.pipeline import compile_model

TARGETS = ("cpu:x86-64-v3", "cuda:h100")


def source_digest(artifact: Path) -> str:
    """sha256 over the artifact's generated sources (names and bytes, in name order), with
    each kernel symbol replaced by its position in the plan: symbols come from cache keys,
    which hash the compiler's own source, so any edit renames them all."""
    with tarfile.open(artifact) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    manifest = json.loads(files["manifest.json"])
    positions: dict[str, str] = {}
    for k in manifest["kernels"]:
        positions.setdefault(k["symbol"], f"kernel{len(positions)}")
    pattern = re.compile("|".join(map(re.escape, sorted(positions, key=len, reverse=True))) or "$^")

    def normal(text: str) -> str:
        return pattern.sub(lambda m: positions[m.group(0)], text)

    h = hashlib.sha256()
    sources = {normal(n): normal(d.decode()) for n, d in files.items() if n.startswith("src/")}
    for name in sorted(sources):
        h.update(name.encode() + b"\0" + sources[name].encode())
    return h.hexdigest()


def main() -> int:
    total = hashlib.sha256()
    with tempfile.TemporaryDirectory() as d:
        for target in TARGETS:
            for name in sorted(ZOO):
                out = Path(d) / f"{name}.tar.gz"
                compile_model(ZOO[name](), target, {"validate": False, "measure": False, "threads": 2},
                              output=out)
                digest = source_digest(out)
                total.update(digest.encode())
                print(f"{target} {name} {digest}")
    print(f"total {total.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
