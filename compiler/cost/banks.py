"""Shared-memory bank conflicts of row-major staging buffers, and the padding that avoids them.

A warp reading down a column of a buffer whose rows are `w` words apart hits
only banks / gcd(w, banks) distinct banks, so accesses serialise gcd(w, banks)
ways. Padding each row until gcd(w + pad, banks) == 1 spreads the column over
all banks (Roller's padding rule).
"""

from __future__ import annotations

import functools
import math


def _row_words(row_elems: int, elem_bytes: int) -> int:
    return max(1, -(-row_elems * elem_bytes // 4))


@functools.cache
def conflict_ways(row_elems: int, elem_bytes: int, banks: int) -> int:
    """How many ways a column read of an unpadded buffer serialises (1 = conflict-free).

    An element wider than a bank word occupies several banks by itself; only
    the sharing beyond that counts.
    """
    if row_elems <= 1 or banks <= 1:
        return 1
    words_per_elem = max(1, elem_bytes // 4)
    return math.gcd(_row_words(row_elems, elem_bytes), banks) // math.gcd(words_per_elem, banks)


@functools.cache
def row_padding(row_elems: int, elem_bytes: int, banks: int) -> int:
    """Elements to append to each row so consecutive rows start on different banks."""
    if conflict_ways(row_elems, elem_bytes, banks) == 1:
        return 0
    per_word = max(1, 4 // elem_bytes)  # elements that share one 4-byte bank word
    pad = per_word
    while conflict_ways(row_elems + pad, elem_bytes, banks) != 1:
        pad += per_word
    return pad
