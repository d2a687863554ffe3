"""The ONNX node test suite, compiled and run through tileforge's backend on the CPU.

Every node test whose ops are all supported must pass, unless it is listed in
compiler.frontend.conformance.KNOWN_GAPS with a reason (see conftest.py);
tests using other ops skip, naming the op. `python -m compiler.bench.conformance`
records the counts in docs/CONFORMANCE.md.
"""

import onnx.backend.test
import pytest

from compiler.onnx_backend import TileforgeBackend

pytestmark = pytest.mark.conformance

_suite = onnx.backend.test.BackendTest(TileforgeBackend, __name__)
OnnxBackendNodeModelTest = _suite.test_cases["OnnxBackendNodeModelTest"]
