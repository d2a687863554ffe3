"""Arrays to and from inference jobs as .npz archives: read without pickle, each array's
header checked against the artifact's input specs before any of its data is read, so a
hostile archive (pickled objects, another dtype, a shape that claims terabytes) is
refused with a 422 naming the problem instead of being loaded."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.lib import format as npy

from compiler.runtime.executable import TensorSpec
from server.services.errors import ServiceError

SUFFIX = ".npy"
MAX_NAMES_SHOWN = 5  # of missing or unexpected arrays, in an error message


def read_npz(data: bytes, specs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """The arrays of an .npz archive that holds exactly one array per spec, of its name,
    shape and dtype (422 naming the first mismatch otherwise)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
        raise _refuse("inputs are not an .npz file (a zip archive of .npy arrays, as numpy.savez writes)") from None
    with archive:
        members: dict[str, zipfile.ZipInfo] = {}
        for m in archive.infolist():
            if not m.filename.endswith(SUFFIX) or m.is_dir():
                raise _refuse(f"inputs hold {m.filename[:80]!r}, which is not an .npy array")
            members[m.filename[: -len(SUFFIX)]] = m
        expected = {s.name: s for s in specs}
        missing, unexpected = sorted(set(expected) - set(members)), sorted(set(members) - set(expected))
        if missing:
            raise _refuse(f"inputs lack {_names(missing)}; the artifact's inputs are {_names(list(expected))}")
        if unexpected:
            raise _refuse(f"inputs hold {_names(unexpected)}, which the artifact does not take; "
                          f"its inputs are {_names(list(expected))}")
        return {name: _read_array(archive, members[name], spec) for name, spec in expected.items()}


def write_npz(arrays: Mapping[str, np.ndarray]) -> bytes:
    """`arrays` as an uncompressed .npz archive (numpy.load reads it without pickle)."""
    out = io.BytesIO()
    np.savez(out, **{name: np.ascontiguousarray(a) for name, a in arrays.items()})
    return out.getvalue()


def _read_array(archive: zipfile.ZipFile, member: zipfile.ZipInfo, spec: TensorSpec) -> np.ndarray:
    """One member's array, its header checked against `spec` before its data is read."""
    name = spec.name
    try:
        with archive.open(member) as f:
            shape, dtype = _header(f)
            if dtype.hasobject:
                raise _refuse(f"input {name!r} holds Python objects (pickled data); only numeric arrays are accepted")
            if dtype != spec.np_dtype:
                raise _refuse(f"input {name!r} has dtype {dtype}, but the artifact takes {spec.np_dtype}")
            if shape != spec.shape:
                raise _refuse(f"input {name!r} has shape {list(shape)}, but the artifact takes {list(spec.shape)}")
        with archive.open(member) as f:
            return npy.read_array(f, allow_pickle=False)
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, NotImplementedError) as e:
        raise _refuse(f"input {name!r} is not a readable .npy array: {e}") from None


def _header(f: io.BufferedIOBase) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of an .npy stream positioned at its start (ValueError when malformed)."""
    version = npy.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = npy.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = npy.read_array_header_2_0(f)
    else:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not accepted (1.0 or 2.0 are)")
    return tuple(int(d) for d in shape), np.dtype(dtype)


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n[:80]) for n in names[:MAX_NAMES_SHOWN])
    return shown + (f" and {len(names) - MAX_NAMES_SHOWN} more" if len(names) > MAX_NAMES_SHOWN else "")


def _refuse(detail: str) -> ServiceError:
    return ServiceError(422, detail)
