"""Element types known to the IR, with their C spelling, numpy type and size."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    """One element type: its IR name, C type in memory, numpy type and byte size."""

    name: str
    c_type: str
    np_type: type
    nbytes: int
    is_float: bool


_TABLE = {
    "float32": DType("float32", "float", np.float32, 4, True),
    "float64": DType("float64", "double", np.float64, 8, True),
    # float16 is stored as its bits in C (compiler/codegen/cexpr.py says why)
    "float16": DType("float16", "uint16_t", np.float16, 2, True),
    "int64": DType("int64", "int64_t", np.int64, 8, False),
    "int32": DType("int32", "int32_t", np.int32, 4, False),
    "int16": DType("int16", "int16_t", np.int16, 2, False),
    "int8": DType("int8", "int8_t", np.int8, 1, False),
    "uint64": DType("uint64", "uint64_t", np.uint64, 8, False),
    "uint32": DType("uint32", "uint32_t", np.uint32, 4, False),
    "uint16": DType("uint16", "uint16_t", np.uint16, 2, False),
    "uint8": DType("uint8", "uint8_t", np.uint8, 1, False),
    "bool": DType("bool", "uint8_t", np.bool_, 1, False),
}

# The integer type used for index arithmetic everywhere.
INDEX = "int64"


def dtype(name: str) -> DType:
    """Look up a dtype by IR name; KeyError names the unknown type."""
    try:
        return _TABLE[name]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r}") from None


def known_dtypes() -> tuple[str, ...]:
    """All IR dtype names."""
    return tuple(_TABLE)


def from_numpy(np_dtype: np.dtype | type) -> str:
    """The IR name of a numpy dtype."""
    d = np.dtype(np_dtype)
    for name, info in _TABLE.items():
        if np.dtype(info.np_type) == d:
            return name
    raise KeyError(f"numpy dtype {d} has no IR equivalent")
