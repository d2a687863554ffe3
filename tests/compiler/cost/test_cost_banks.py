"""Shared-memory bank conflicts and row padding."""

import pytest

from compiler.cost import conflict_ways, row_padding


@pytest.mark.parametrize(("row", "elem", "ways"), [
    (32, 4, 32), (64, 4, 32), (8, 4, 8), (33, 4, 1), (7, 4, 1), (1, 4, 1), (64, 8, 16), (16, 2, 8),
])
def test_conflict_ways(row, elem, ways):
    assert conflict_ways(row, elem, 32) == ways


@pytest.mark.parametrize(("row", "elem"), [(32, 4), (128, 4), (8, 4), (64, 8), (64, 2), (17, 4)])
def test_padding_makes_column_reads_conflict_free(row, elem):
    pad = row_padding(row, elem, 32)
    assert conflict_ways(row + pad, elem, 32) == 1
    assert pad == 0 or conflict_ways(row, elem, 32) > 1
    assert pad <= 4  # a word or two, not a row


def test_no_banks_no_conflicts():
    assert conflict_ways(32, 4, 1) == 1 and row_padding(32, 4, 1) == 0
