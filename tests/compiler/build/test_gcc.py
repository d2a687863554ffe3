"""The C toolchain: batched object files, one shared library, clear errors."""

from __future__ import annotations

import ctypes
import platform
from pathlib import Path

import pytest

from compiler.build.gcc import (
    BASE_FLAGS,
    X86_TUNING,
    balanced_batches,
    c_flags,
    compile_objects,
    gcc_version,
    has_libmvec,
    link_shared,
)
from compiler.build.sandbox import run_tool
from compiler.codegen.cexpr import PRELUDE
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
    assert c_flags(CPU)[:len(BASE_FLAGS) + 1] == (*BASE_FLAGS, "-march=native")
    other = Target(**{**CPU.__dict__, "extras": {"march": "x86-64-v3"}})
    assert "-march=x86-64-v3" in c_flags(other)
    assert "-ffast-math" not in c_flags(CPU)
    with pytest.raises(BuildError, match="march"):
        c_flags(Target(**{**CPU.__dict__, "extras": {"march": "native -o /etc/x"}}))
    assert "gcc" in gcc_version()


@pytest.mark.skipif(not has_libmvec(), reason="no glibc libmvec here")
def test_vectorized_loops_call_simd_math(tmp_path: Path) -> None:
    src = PRELUDE + """
void k(float* restrict out, const float* restrict x) {
  for (long i = 0; i < 1024; ++i) out[i] = expf(x[i]) + erff(x[i]);
}"""
    obj = compile_objects({"k": src}, c_flags())["k"]
    assert b"_ZGV" in obj  # glibc vector-ABI names: expf / erff ran 8 lanes at a time
    (tmp_path / "k.so").write_bytes(link_shared([obj], {}, c_flags()))
    ctypes.CDLL(str(tmp_path / "k.so"))


@pytest.mark.skipif(platform.machine() not in {"x86_64", "AMD64"}, reason="x86 tuning flags")
def test_x86_kernels_keep_256_bit_accesses_whole() -> None:
    # gcc accepts the flags, and a vector store it cannot prove aligned stays one store
    assert set(X86_TUNING) <= set(c_flags())
    src = ("typedef float v8 __attribute__((vector_size(32), aligned(4)));\n"
           "void k(float* y, const float* x) { *(v8*)y = *(const v8*)x * 2.0f; }\n")
    (obj,) = compile_objects({"k": src}, (*c_flags(), "-mavx2", "-mtune=znver1")).values()
    listing = run_tool(["objdump", "-d", "k.o"], {"k.o": obj}, ()).stdout
    assert "vextractf128" not in listing


def test_long_sources_go_to_different_gcc_runs() -> None:
    """Two long sources (a Winograd transform's size) and small ones, whose names would deal both
    long ones to the same run in turn: each run gets one, the small ones fill in, nothing is lost."""
    sources = {"k_a": "x" * 200_000, "k_b": "y" * 1_000, "k_c": "z" * 210_000, "k_d": "w" * 2_000}
    batches = balanced_batches(sources, 2)
    assert sorted(sum(len(src) > 100_000 for _, src in batch) for batch in batches) == [1, 1]
    assert sorted(sum(len(src) for _, src in batch) for batch in batches) == [203_000, 210_000]
    assert sorted(name for batch in batches for name, _ in batch) == sorted(sources)
    assert balanced_batches(sources, 2) == batches  # the same split every time
