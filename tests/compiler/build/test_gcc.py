"""The C toolchain: batched object files, one shared library, clear errors."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from compiler.build.gcc import BASE_FLAGS, c_flags, compile_objects, gcc_version, link_shared
from compiler.errors import BuildError
from compiler.target.base import Target

CPU = Target(name="cpu", kind="cpu", arch="x86_64", levels=(), units=2, lanes=8, banks=1,
             registers=16, peak_flops={})


def test_objects_link_into_a_working_library(tmp_path: Path) -> None:
    sources = {f"f{k}": f"long f{k}(long x) {{ return x * {k} + 1; }}" for k in range(5)}
    objects = compile_objects(sources, c_flags())
    assert sorted(objects) == sorted(sources) and all(o.startswith(b"\x7fELF") for o in objects.values())
    entry = {"entry": "long f3(long); long total(long x) { return f3(x) + 1000; }"}
    so = tmp_path / "lib.so"
    so.write_bytes(link_shared(list(objects.values()), entry, c_flags()))
    lib = ctypes.CDLL(str(so))
    lib.total.restype = ctypes.c_long
    lib.total.argtypes = [ctypes.c_long]
    assert lib.total(2) == 1007


def test_compile_error_is_a_build_error_with_the_compiler_message() -> None:
    with pytest.raises(BuildError) as err:
        compile_objects({"bad": "int bad(void) { return undeclared_thing; }"}, c_flags())
    assert "undeclared_thing" in str(err.value) and "gcc failed" in str(err.value)


def test_shell_syntax_in_flags_or_sources_is_inert(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    flags = (*c_flags(), f'-DNOTE="; touch {marker}; echo"')
    objects = compile_objects({"ok": f'/* $(touch {marker}) */ const char* ok(void) {{ return NOTE; }}'}, flags)
    assert objects["ok"].startswith(b"\x7fELF") and not marker.exists()
    with pytest.raises(BuildError):
        compile_objects({"ok": "int ok;"}, (*c_flags(), f"; touch {marker}"))
    assert not marker.exists()


def test_names_must_be_identifiers() -> None:
    with pytest.raises(BuildError, match="not a C identifier"):
        compile_objects({"../evil": "int x;"}, c_flags())
    with pytest.raises(BuildError, match="not a C identifier"):
        link_shared([], {"a b": "int x;"}, c_flags())


def test_flags_come_from_the_target() -> None:
    assert c_flags(CPU) == (*BASE_FLAGS, "-march=native")
    other = Target(**{**CPU.__dict__, "extras": {"march": "x86-64-v3"}})
    assert c_flags(other)[-1] == "-march=x86-64-v3"
    assert "-ffast-math" not in c_flags(CPU)
    with pytest.raises(BuildError, match="march"):
        c_flags(Target(**{**CPU.__dict__, "extras": {"march": "native -o /etc/x"}}))
    assert "gcc" in gcc_version()
