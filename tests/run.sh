#!/usr/bin/env bash
# Runs the whole suite. Tests that need a GPU, PostgreSQL/Redis or a browser
# skip with a reason where those are missing. pytest's exit 5 ("no tests
# collected") is an error here: a green run must have run tests.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
mkdir -p test-artifacts
$PY -m pytest -q -rs --durations=15 --junitxml=test-artifacts/junit.xml "$@" tests
rc=$?
if [ "$rc" -eq 5 ]; then
    echo "tests/run.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$rc"
