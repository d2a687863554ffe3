"""Objects compiled once per compilation. The top-k timer compiles every candidate of a
kernel under a name of its own (schedule/measure.py `Timing.symbols`), the split-back
check compiles fused groups and their parts again, and the build compiles the winners once
more under the kernels' own names: the same source, but for the name. gcc ran on 1050
sources to build ResNet-50 cold (35.8 s timing candidates, 19 s building winners already
timed, two threads). A source met again under another name is the object compiled first,
its symbols renamed (binutils' objcopy), the code byte for byte what gcc would give.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from compiler.build.gcc import COMPILE_JOBS, checked_names, compile_objects
from compiler.build.sandbox import run_tool


def renamed_object(obj: bytes, old: str, new: str) -> bytes:
    """`obj`, compiled from a source whose names all begin with symbol `old` (the kernel,
    its helpers, gcc's outlined OpenMP bodies), with `old` at the start of each defined
    symbol replaced by `new`."""
    checked_names([old, new], "symbol")
    listed = run_tool(["nm", "--defined-only", "o.o"], {"o.o": obj}, ()).stdout
    names = sorted({fields[-1] for fields in map(str.split, listed.splitlines())
                    if fields and fields[-1].startswith(old)})
    mapping = "".join(f"{name} {new}{name[len(old):]}\n" for name in names)
    return run_tool(["objcopy", "--redefine-syms=map.txt", "o.o", "r.o"],
                    {"o.o": obj, "map.txt": mapping}, ["r.o"]).files["r.o"]


class ObjectMemo:
    """The objects compiled so far, by source with its symbol masked out and flags."""

    def __init__(self) -> None:
        self._objects: dict[bytes, tuple[str, bytes]] = {}  # digest -> (symbol, object)

    @staticmethod
    def _digest(symbol: str, source: str, flags: Sequence[str]) -> bytes:
        return hashlib.sha256("\0".join((source.replace(symbol, "\0"), *flags)).encode()).digest()

    def compile(self, sources: Mapping[str, str], flags: Sequence[str]) -> dict[str, bytes]:
        """Object files of `sources` (symbol -> source), as `compile_objects` gives them;
        those compiled before under any name are not compiled again."""
        digests = {sym: self._digest(sym, src, flags) for sym, src in sources.items()}
        todo: dict[str, str] = {}
        firsts = {}  # digest -> the one symbol it is compiled under here
        for sym, src in sources.items():
            if digests[sym] not in self._objects and firsts.setdefault(digests[sym], sym) == sym:
                todo[sym] = src
        for sym, obj in compile_objects(todo, flags).items():
            self._objects.setdefault(digests[sym], (sym, obj))
        renames = {sym: self._objects[digest] for sym, digest in digests.items() if self._objects[digest][0] != sym}

        def rename(sym: str) -> bytes:
            first, obj = renames[sym]
            return renamed_object(obj, first, sym)
        # two binutils runs each, side by side as gcc's batches run (ResNet-50's cold
        # compile renamed its timed winners one after another: 1.7 s with a core idle)
        with ThreadPoolExecutor(COMPILE_JOBS) as pool:
            renamed = dict(zip(renames, pool.map(rename, renames), strict=True))
        return {sym: renamed[sym] if sym in renamed else self._objects[digest][1] for sym, digest in digests.items()}
