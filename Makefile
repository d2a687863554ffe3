# tileforge: `make serve` and `make test` are the two set-up commands.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv serve test lint bench loadtest chaos clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,client]'
	touch $(STAMP)

venv: $(STAMP)

serve: $(STAMP)
	$(BIN)/tileforge serve --with-worker

lint: $(STAMP)
	$(BIN)/ruff check compiler server worker migrations tests scripts tileforge
	$(BIN)/lint-imports

test: $(STAMP)
	$(BIN)/ruff check compiler server worker migrations tests scripts tileforge
	$(BIN)/lint-imports
	bash tests/run.sh

# Opt-in, minutes long (not part of `make test`); results go in docs/SERVICE.md.
# 50 and 200 clients for 60 s on the embedded default; LOADTEST_BACKEND=postgres for PostgreSQL + Redis.
LOADTEST_BACKEND ?= embedded
loadtest: $(STAMP)
	$(BIN)/python scripts/loadtest.py --backend $(LOADTEST_BACKEND) --clients 50 200 --duration 60

# 20 worker SIGKILLs in a row on PostgreSQL + Redis (the suite kills 2); about 2 to 4 minutes.
chaos: $(STAMP)
	TILEFORGE_TEST_WORKER_KILLS=20 $(BIN)/python -m pytest tests/e2e/test_service_worker_kills.py -q -rs -p no:cacheprovider

BENCH_STAMP := $(VENV)/.bench-installed

# The real-model suite's torch stack: torch pinned and installed first (a CPU wheel), then the
# rest of the `bench` extra. Where it cannot be installed the bench still runs; its real-model
# section then says that torch is missing.
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install -q torch==2.13.0 && $(BIN)/pip install -q -e '.[bench]' && touch $(BENCH_STAMP) \
		|| echo "make bench: the bench extra (torch 2.13.0) could not be installed; real models are skipped" >&2

bench: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m compiler.bench.report --out docs/BENCHMARKS.md

clean:
	rm -rf $(VENV) build *.egg-info
