"""A graph as deep as it is long (issue 18's 20,000-node Relu chain): the frontend walks it
without recursion, so it is checked and lowered, well inside a minute, instead of dying
with a RecursionError."""

import sys
import time

import pytest
from service_kit import OnnxModels

from compiler.frontend import check_model


@pytest.mark.timeout(60)
def test_a_20000_node_chain_is_checked_and_lowered_without_recursion():
    assert sys.getrecursionlimit() < 20_000  # a recursive walk over the chain could not finish
    start = time.monotonic()
    info = check_model(OnnxModels.relu_chain(20_000))  # every input shape is known: lowered too
    assert info.op_histogram == {"Relu": 20_000}
    assert time.monotonic() - start < 60
