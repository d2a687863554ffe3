#!/usr/bin/env bash
# Runs the whole suite in three pytest runs: the compiler's own tests on every core
# (pytest-xdist), then the service, client and end-to-end tests one at a time while the
# ONNX node suite (each of its tests an independent small compile) runs beside them on the
# other cores. Tests that need a GPU, PostgreSQL/Redis or a browser skip with a reason where
# those are missing. pytest's exit 5 ("no tests collected") is an error here: a green run
# must have run tests.
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
compiler=0
if [ "$#" -eq 0 ]; then
    # The compiler's own tests share no service, port or file outside their temporary
    # folders, so they run on every core.
    $PY -m pytest -q -rs --durations=15 -n "$JOBS" --junitxml=test-artifacts/junit-compiler.xml \
        --ignore=tests/compiler/conformance tests/compiler
    check "$?" "the compiler suite"; compiler=$?
    set -- --ignore=tests/compiler
fi
# The service tests share PostgreSQL, Redis and ports, so they run one at a time, and mostly
# wait on workers and servers: about one core's work. The node suite takes the other cores
# meanwhile (on 2 cores: 6.6 minutes for both side by side, 9.5 one after the other), its
# output held back until the service tests end so the two do not interleave.
node_log=test-artifacts/conformance.log
$PY -m pytest -q -n "$(( JOBS > 1 ? JOBS - 1 : 1 ))" -p no:cacheprovider \
    --junitxml=test-artifacts/conformance.xml tests/compiler/conformance > "$node_log" 2>&1 &
node_pid=$!
trap 'kill $(jobs -p) 2>/dev/null' EXIT  # interrupted: the node suite stops too
$PY -m pytest -q -rs --durations=15 --junitxml=test-artifacts/junit.xml \
    --ignore=tests/compiler/conformance "$@" tests
check "$?" "the main suite"; main=$?
wait "$node_pid"
conformance=$?
cat "$node_log"
check "$conformance" "the node suite"; conformance=$?
[ "$compiler" -eq 0 ] && [ "$main" -eq 0 ] && [ "$conformance" -eq 0 ]
