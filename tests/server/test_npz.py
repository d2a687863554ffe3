"""The .npz checks of inference inputs: exactly the artifact's arrays, of its shapes and
dtypes, without pickle; hostile archives are refused (422 naming the problem) before any
array data is read."""

import io
import struct
import zipfile

import numpy as np
import pytest

from compiler.runtime.executable import TensorSpec
from server.services.errors import ServiceError
from server.services.npz import read_npz, write_npz

SPECS = [TensorSpec("x", (4, 16), "float32"), TensorSpec("ids", (3,), "int64")]


def _npz(**arrays) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def _good() -> dict[str, np.ndarray]:
    return {"x": np.arange(64, dtype=np.float32).reshape(4, 16), "ids": np.array([1, 2, 3], np.int64)}


def _refused(data: bytes, match: str) -> None:
    with pytest.raises(ServiceError, match=match) as e:
        read_npz(data, SPECS)
    assert e.value.status == 422


def test_the_arrays_come_back_as_sent_and_round_trip_through_write_npz():
    arrays = read_npz(_npz(**_good()), SPECS)
    assert set(arrays) == {"x", "ids"}
    for name, a in _good().items():
        np.testing.assert_array_equal(arrays[name], a)
        assert arrays[name].dtype == a.dtype
    again = read_npz(write_npz(arrays), SPECS)
    np.testing.assert_array_equal(again["x"], arrays["x"])


def test_a_fortran_ordered_array_is_read_with_its_values():
    arrays = _good() | {"x": np.asfortranarray(_good()["x"])}
    np.testing.assert_array_equal(read_npz(_npz(**arrays), SPECS)["x"], _good()["x"])


def test_missing_and_unexpected_arrays_are_named():
    _refused(_npz(x=_good()["x"]), r"inputs lack 'ids'; the artifact's inputs are 'x', 'ids'")
    _refused(_npz(**_good(), extra=np.zeros(1)), r"inputs hold 'extra', which the artifact does not take")


def test_a_wrong_shape_or_dtype_is_named():
    _refused(_npz(**_good() | {"x": np.zeros((4, 15), np.float32)}),
             r"input 'x' has shape \[4, 15\], but the artifact takes \[4, 16\]")
    _refused(_npz(**_good() | {"ids": np.array([1, 2, 3], np.int32)}),
             "input 'ids' has dtype int32, but the artifact takes int64")
    _refused(_npz(**_good() | {"x": _good()["x"].astype(">f4")}), "input 'x' has dtype >f4")


def test_pickled_objects_are_refused_unread():
    _refused(_npz(**_good() | {"x": np.array([{"boom": 1}], dtype=object)}), "input 'x' holds Python objects")


def _with_member(name: str, payload: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("ids.npy", _npy(np.array([1, 2, 3], np.int64)))
        z.writestr(name, payload)
    return out.getvalue()


def _npy(a: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, a, allow_pickle=False)
    return out.getvalue()


def test_a_header_that_claims_a_huge_shape_is_refused_before_any_data_is_read():
    header = repr({"descr": "<f4", "fortran_order": False, "shape": (1 << 40, 1 << 20)}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header  # no data at all
    _refused(_with_member("x.npy", npy), r"input 'x' has shape \[1099511627776, 1048576\]")


def test_what_is_not_an_npz_of_npy_arrays_is_refused():
    _refused(b"not a zip at all", r"inputs are not an \.npz file")
    _refused(_with_member("x.txt", b"hello"), r"inputs hold 'x.txt', which is not an \.npy array")
    _refused(_with_member("x.npy", b"garbage"), "input 'x' is not a readable .npy array")
    truncated = _npy(_good()["x"])[:-10]
    _refused(_with_member("x.npy", truncated), "input 'x' is not a readable .npy array")
