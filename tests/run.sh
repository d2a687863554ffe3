#!/usr/bin/env bash
# Runs the whole suite in two pytest runs: everything but the ONNX node suite,
# then the node suite on every core (pytest-xdist; each of its tests is an
# independent small compile). Tests that need a GPU, PostgreSQL/Redis or a
# browser skip with a reason where those are missing. pytest's exit 5
# ("no tests collected") is an error here: a green run must have run tests.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
mkdir -p test-artifacts

check() {  # check RC WHAT
    if [ "$1" -eq 5 ]; then
        echo "tests/run.sh: $2 collected no tests" >&2
        return 1
    fi
    return "$1"
}

JOBS="${TILEFORGE_TEST_JOBS:-$(nproc)}"
if [ "$#" -gt 0 ]; then  # a selection: one run, as given
    $PY -m pytest -q -rs --durations=15 --junitxml=test-artifacts/junit.xml \
        --ignore=tests/compiler/conformance "$@" tests
    main=$?
else
    # The compiler's own tests share no service, port or file outside their temporary
    # folders, so they run on every core; the service, client and end-to-end tests share
    # PostgreSQL, Redis and ports, so they run one at a time (the whole suite serially took
    # 12-14 minutes of a 20-minute CI budget on a 2-core Xeon).
    $PY -m pytest -q -rs --durations=15 -n "$JOBS" --junitxml=test-artifacts/junit-compiler.xml \
        --ignore=tests/compiler/conformance tests/compiler
    compiler=$?
    $PY -m pytest -q -rs --durations=15 --junitxml=test-artifacts/junit.xml \
        --ignore=tests/compiler tests
    main=$?
    check "$compiler" "the compiler suite"; compiler=$?
    [ "$main" -eq 0 ] && main=$compiler
fi
$PY -m pytest -q -n "$JOBS" -p no:cacheprovider \
    --junitxml=test-artifacts/conformance.xml tests/compiler/conformance
conformance=$?
check "$main" "the main suite"; main=$?
check "$conformance" "the node suite"; conformance=$?
[ "$main" -eq 0 ] && [ "$conformance" -eq 0 ]
