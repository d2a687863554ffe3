"""Objects compiled once per compilation: a source met again under another symbol is the
first object renamed, and runs as the source compiled under that symbol would."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from compiler.build import object_memo
from compiler.build.gcc import c_flags, link_shared
from compiler.build.object_memo import ObjectMemo
from compiler.errors import BuildError


def kernel(symbol: str, scale: int) -> str:
    # a helper named after the kernel and an OpenMP body gcc outlines under the kernel's name
    return (f"static long {symbol}_helper(long x) {{ return x * {scale}; }}\n"
            f"long {symbol}_team(long x) {{ long s = 0;\n"
            f"  #pragma omp parallel for reduction(+:s)\n"
            f"  for (long i = 0; i < 4; ++i) s += {symbol}_helper(x) + i;\n"
            f"  return s; }}\n"
            f"long {symbol}(long x) {{ return {symbol}_team(x) + 1; }}\n")


@pytest.fixture
def gcc_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    runs: list[list[str]] = []
    real = object_memo.compile_objects

    def counted(sources: dict[str, str], flags: tuple[str, ...]) -> dict[str, bytes]:
        runs.append(sorted(sources))
        return real(sources, flags)

    monkeypatch.setattr(object_memo, "compile_objects", counted)
    return runs


def test_a_source_under_another_symbol_is_renamed_not_compiled(gcc_runs: list[list[str]], tmp_path: Path) -> None:
    memo = ObjectMemo()
    first = memo.compile({"tf_cand_ab_0": kernel("tf_cand_ab_0", 3), "tf_cand_ab_1": kernel("tf_cand_ab_1", 5)},
                         c_flags())
    built = memo.compile({"tf_final": kernel("tf_final", 5), "tf_other": kernel("tf_other", 7)}, c_flags())
    assert gcc_runs == [["tf_cand_ab_0", "tf_cand_ab_1"], ["tf_other"]]
    assert built["tf_final"] != first["tf_cand_ab_1"]
    so = tmp_path / "lib.so"
    so.write_bytes(link_shared([first["tf_cand_ab_0"], built["tf_final"], built["tf_other"]], {}, c_flags()))
    lib = ctypes.CDLL(str(so))
    for name, want in (("tf_cand_ab_0", 4 * 6 + 6 + 1), ("tf_final", 4 * 10 + 6 + 1), ("tf_other", 4 * 14 + 6 + 1)):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = ctypes.c_long, [ctypes.c_long]
        assert fn(2) == want
    # every symbol of the reused object took the new name: none is left under the old one
    assert not hasattr(lib, "tf_cand_ab_1") and not hasattr(lib, "tf_cand_ab_1_team")
    assert hasattr(lib, "tf_final_team")


def test_other_flags_compile_again(gcc_runs: list[list[str]]) -> None:
    memo = ObjectMemo()
    memo.compile({"tf_a": kernel("tf_a", 2)}, c_flags())
    memo.compile({"tf_b": kernel("tf_b", 2)}, (*c_flags(), "-DTF_OTHER"))
    assert gcc_runs == [["tf_a"], ["tf_b"]]


def test_names_must_be_identifiers() -> None:
    obj = ObjectMemo().compile({"tf_a": kernel("tf_a", 2)}, c_flags())["tf_a"]
    with pytest.raises(BuildError, match="not a C identifier"):
        object_memo.renamed_object(obj, "tf_a", "x; rm -rf /")


def test_one_source_under_two_symbols_in_one_call_is_compiled_once(gcc_runs: list[list[str]], tmp_path: Path) -> None:
    built = ObjectMemo().compile({"tf_a": kernel("tf_a", 2), "tf_b": kernel("tf_b", 2)}, c_flags())
    assert gcc_runs == [["tf_a"]]
    so = tmp_path / "lib.so"
    so.write_bytes(link_shared(list(built.values()), {}, c_flags()))
    lib = ctypes.CDLL(str(so))
    assert lib.tf_a(1) == lib.tf_b(1) == 4 * 2 + 6 + 1


def test_renames_of_one_call_each_take_their_own_name(gcc_runs: list[list[str]], tmp_path: Path) -> None:
    # renamed side by side (two binutils runs each): every object keyed by its own symbol,
    # in the order asked
    memo = ObjectMemo()
    memo.compile({"tf_a": kernel("tf_a", 2), "tf_b": kernel("tf_b", 3)}, c_flags())
    scales = {"tf_c": 2, "tf_d": 3, "tf_e": 2, "tf_f": 3, "tf_g": 3}
    built = memo.compile({name: kernel(name, scale) for name, scale in scales.items()}, c_flags())
    assert gcc_runs[0] == ["tf_a", "tf_b"] and not any(gcc_runs[1:])  # nothing compiled again
    assert list(built) == list(scales)
    so = tmp_path / "lib.so"
    so.write_bytes(link_shared(list(built.values()), {}, c_flags()))
    lib = ctypes.CDLL(str(so))
    for name, scale in scales.items():
        assert getattr(lib, name)(1) == 4 * scale + 6 + 1
