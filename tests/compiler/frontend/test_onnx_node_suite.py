"""The ONNX node test suite through import_model + run_graph (the TE interpreter).

Every node test whose operators and element types we support must pass, except
the documented KNOWN_GAPS, which must still fail (so the list stays honest); and
no unpadded load of any lowered kernel may reach outside its tensor, for any data.
"""

import time

import pytest
from bounds_kit import assert_loads_in_bounds

from compiler.frontend.conformance import KNOWN_GAPS, bind_case, candidates, check_case, node_cases
from compiler.ir.graph_interp import run_graph


def run_frontend(model, inputs):
    graph, runtime_inputs, _ = bind_case(model, inputs)
    assert_loads_in_bounds(graph)  # whatever the data: generated kernels must never read out of bounds
    return run_graph(graph, runtime_inputs)


@pytest.mark.conformance
@pytest.mark.slow
def test_node_suite_through_the_interpreter():
    start = time.monotonic()
    cases = candidates()
    passed, failed, gaps_passing = [], [], []
    for case in cases:
        try:
            check_case(case, run_frontend)
        except Exception as e:  # each failure is collected and reported below
            if case.name not in KNOWN_GAPS:
                failed.append(f"{case.name}: {type(e).__name__}: {str(e).strip().splitlines()[0][:200]}")
            continue
        (gaps_passing if case.name in KNOWN_GAPS else passed).append(case.name)
    summary = (f"node suite: {len(node_cases())} tests, {len(cases)} with supported ops and types; "
               f"{len(passed)} pass, {len(KNOWN_GAPS)} known gaps, {len(failed)} fail "
               f"({time.monotonic() - start:.0f} s)")
    print(summary)
    assert not failed, summary + "\n" + "\n".join(failed)
    assert not gaps_passing, f"known gaps that now pass (remove them from KNOWN_GAPS): {gaps_passing}"
    assert set(KNOWN_GAPS) <= {c.name for c in cases}, "KNOWN_GAPS names a test that is not a candidate"
